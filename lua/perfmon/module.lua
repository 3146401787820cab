--- perfmon.module: the face each of perfmon's modules returns, which is
-- what package.loaded holds (docs/api.md, "Modules").
--
-- Lua names the function of every frame of a traceback, and of an
-- argument error, by searching package.loaded two levels deep with
-- lua_next (lauxlib.c's pushglobalfuncname), and hosts take tracebacks
-- often: busted takes one for every test it declares.  A face is empty to
-- lua_next, its module's fields behind __index, so that perfmon adds one
-- entry to that search per module, not one per function.  This module is
-- a function itself, for the same reason.

local next, setmetatable, getmetatable, type = next, setmetatable, getmetatable, type

--- The face of module table t: reads, writes and pairs go to t, and a
-- call to t's __call, if it has one.
return function(t)
  if type(t) ~= "table" then
    error(("bad argument #1 to 'perfmon.module' (table expected, got %s)"):format(
      t == nil and "no value" or type(t)), 2)
  end
  local mt = getmetatable(t)
  return setmetatable({}, {
    __index = t,
    __newindex = t,
    __pairs = function() return next, t, nil end,
    __call = type(mt) == "table" and mt.__call or nil,
  })
end

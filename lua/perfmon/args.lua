--- perfmon.args: argument errors that name the caller's line, shared by
-- perfmon's Lua modules.

local module = require("perfmon.module")

local args = {}

--- Raises "bad argument #n to 'fname' (msg)".  depth: the perfmon
-- functions between this call and the user's code (1 in an API function,
-- 2 in a helper it calls), so that the error names the user's line.
function args.error(n, fname, msg, depth)
  error(("bad argument #%d to '%s' (%s)"):format(n, fname, msg), (depth or 1) + 2)
end

--- Whether fn can be called: a function, or a value with __call.
function args.callable(fn)
  local mt = getmetatable(fn)
  return type(fn) == "function" or (type(mt) == "table" and mt.__call ~= nil)
end

--- Raises unless argument n of fname is callable; depth as for args.error,
-- counted from the caller of check_callable.
function args.check_callable(fn, n, fname, depth)
  if not args.callable(fn) then
    args.error(n, fname, "function expected, got " .. type(fn), (depth or 1) + 1)
  end
end

return module(args)

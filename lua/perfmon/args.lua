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

--- The reason of an argument error err that names fname ("bad argument
-- #n to 'fname' (reason)", with or without a position), or nil.
function args.reason(err, fname)
  if type(err) ~= "string" then return nil end
  local name, why = err:match("bad argument #%d+ to '([^']*)' %((.*)%)$")
  return name == fname and why or nil
end

--- Returns callee(v) for argument n of fname, which passes v on to the
-- function named cname: an argument error of cname's is raised again as
-- fname's, at the line that called fname; any other error (memory) as it
-- was.  Called from fname itself, not as its tail call.
function args.pass_on(n, fname, v, callee, cname)
  local ok, r = pcall(callee, v)
  if ok then return r end
  local why = args.reason(r, cname)
  if why then args.error(n, fname, why, 2) end
  error(r, 0)
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

--- Raises unless self, a method's, is an object of metatable mt ("what":
-- "monitor"), so that x.close() for x:close() names the mistake instead of
-- failing inside perfmon; fname is the method as the API writes it
-- ("monitor:close"), depth as for check_callable.
function args.check_self(self, mt, fname, what, depth)
  if getmetatable(self) ~= mt then
    args.error(1, fname, ("%s expected, got %s (call it as x:%s())"):format(
      what, type(self), fname:match("[^:]*$")), (depth or 1) + 1)
  end
end

return module(args)

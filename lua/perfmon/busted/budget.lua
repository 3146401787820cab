--- perfmon.busted.budget: --budget-ms, a test that spends more CPU time
-- than the budget fails itself.
--
-- The test's function is run by a runner put in its place for the test:
-- the function, then the end of the test's stretch (the handler's
-- `finish`) and the budget's check, so that the failure is the test's own,
-- raised where busted expects the test's failures.  The failure points at
-- the test's own line with no traceback, and the runner's frame is cut
-- from the tracebacks of the test's other failures and errors.

local module = require("perfmon.module")
local busted = require("busted")

local M = {}

-- A traceback line of the runner's (below), cut from tracebacks.
local RUNNER_LINE = "\n[^\n]*" .. debug.getinfo(1, "S").short_src:gsub("%p", "%%%0") .. ":%d+: in [^\n]*"

-- The spec's own position of a test, for a failure the runner raises.
local function where(element)
  local t = element.trace
  return t and t.short_src and ("%s:%d: "):format(t.short_src, t.currentline) or ""
end

--- A budget: finish(rec) ends a test's stretch and returns the message
-- of its budget failure if it went over, else nil.
function M.new(finish)
  return { finish = finish, failures = {} } -- failures: message -> true
end

--- Puts the runner in the place of a test's function (rec.test keeps it).
-- The function is called through an expression, so that Lua names its
-- frame as busted's call would (`in function <spec/x_spec.lua:12>`).
function M.wrap(budget, element, rec)
  local test = element.run
  rec.test = test
  element.run = function()
    (rec.test or test)()
    local over = budget.finish(rec)
    if over then
      local msg = where(element) .. over
      budget.failures[msg] = true
      busted.fail(msg, 0)
    end
  end
end

--- Gives a test its own function back, at its end.
function M.unwrap(element, rec)
  element.run = rec.test
end

--- A failure or error of a test run by the runner: a budget failure, the
-- test's as a whole, points at the test's line with no traceback; any
-- other loses the runner's frame.
function M.trim(budget, element, message, trace)
  if type(trace) ~= "table" or type(trace.traceback) ~= "string" then return end
  if budget.failures[message] then
    trace.short_src, trace.currentline = element.trace.short_src, element.trace.currentline
    trace.traceback = ""
  else
    trace.traceback = trace.traceback:gsub(RUNNER_LINE, "")
  end
end

return module(M)

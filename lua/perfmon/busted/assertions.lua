--- perfmon.busted.assertions: `assert.cpu_under(ms, fn)` and
-- `assert.no_jank(fn)`, registered with luassert, and `measure(fn)` they
-- are made of.

local module = require("perfmon.module")
local perfmon = require("perfmon")
local args = require("perfmon.args")
local groups = require("perfmon.busted.groups")
local ledger = require("perfmon.busted.ledger")
local report = require("perfmon.busted.report")

local M = {}

local ms, describe_top = report.ms, report.describe_top

-- Runs fn and snapshots around it, in a nested loop of its own: a
-- snapshot inside an event would leave the event out, and fn may run
-- events of its own whatever its caller holds.
local function measured(mon, fn)
  local before = mon:snapshot()
  fn()
  return mon:snapshot():subtract(before)
end

--- Runs fn in a nested loop of its own; returns its CPU µs and the groups
-- that spent it ({ [id] = {name, kind, cpu_us, self_us} }).
function M.measure(fn)
  args.check_callable(fn, 1, "perfmon.busted.measure")
  groups.modules()
  -- a monitor of its own, closed after: a spec that checks that no
  -- monitor is open must not find this one
  local mon <close> = perfmon.monitor{ "jank" }
  local d = perfmon.nested_loop(measured, mon, fn)
  local spent = {}
  for id, st in pairs(d.groups) do
    local cpu, self = ledger.delta(st.cpu_us, st.self_us, d.process.cpu_us)
    if cpu > 0 then spent[id] = { name = st.name, kind = st.kind, cpu_us = cpu, self_us = self } end
  end
  return d.process.cpu_us, spent
end

local function message(arguments, msg)
  arguments[1], arguments.n, arguments.nofmt = msg, 1, { true }
end

local function cpu_under(_, arguments)
  local limit, fn = arguments[1], arguments[2]
  if type(limit) ~= "number" or limit ~= limit or limit <= 0 then
    args.error(1, "assert.cpu_under", "positive number of ms expected, got "
      .. (math.type(limit) and tostring(limit) or type(limit)), 2)
  end
  if type(fn) ~= "function" then
    args.error(2, "assert.cpu_under", "function expected, got " .. type(fn), 2)
  end
  local us, spent = M.measure(fn)
  local under = us < limit * 1000
  message(arguments, (under and "Expected more than %s ms of CPU, spent %s ms; %s"
    or "Expected under %s ms of CPU, spent %s ms; %s")
    :format(ms(limit * 1000), ms(us), describe_top(spent)))
  return under
end

local function no_jank(_, arguments)
  local fn = arguments[1]
  if type(fn) ~= "function" then
    args.error(1, "assert.no_jank", "function expected, got " .. type(fn), 2)
  end
  local us, spent = M.measure(fn)
  local smooth = us < report.JANK_US
  message(arguments, ("Expected %s jank (%s ms of CPU in one event), spent %s ms; %s")
    :format(smooth and "a" or "no", ms(report.JANK_US), ms(us), describe_top(spent)))
  return smooth
end

--- Registers the assertions with luassert, if it is there.
function M.register()
  local ok, say = pcall(require, "say")
  local ok2, luassert = pcall(require, "luassert")
  if not (ok and ok2) then return end
  say:set("assertion.perfmon.positive", "%s")
  say:set("assertion.perfmon.negative", "%s")
  luassert:register("assertion", "cpu_under", cpu_under,
    "assertion.perfmon.positive", "assertion.perfmon.negative")
  luassert:register("assertion", "no_jank", no_jank,
    "assertion.perfmon.positive", "assertion.perfmon.negative")
end

return module(M)

-- bench/preempt.lua [EVENTS]: how far a group's charged CPU time is from its
-- own, when the thread is preempted (run by bench/preempt, under CPU hogs).
--
-- Each event: the host spins 5 ms, then plugin A 5 ms, four times, then the
-- host 5 ms.  A times its own spins with os.clock (the thread's CPU time,
-- the ground truth); the error is perfmon's charge for A against it.  The
-- cycle counter runs while the thread waits for the CPU, so each window's
-- CPU time is shared by cycles: a window holding both the host and A gives
-- A part of the host's lost time, or the host part of A's.

package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path

local perfmon = require("perfmon")
local stats = require("stats")

local events = tonumber(arg[1] or 40)
assert(events and events >= 1 and events == math.floor(events),
  "bench/preempt.lua: EVENTS must be a positive integer")

local function spin(ms)
  local t = os.clock() + ms / 1000
  while os.clock() < t do end
end

local group = perfmon.group{ name = "A", kind = "plugin" }
local env = setmetatable({ spin = spin }, { __index = _G })
local a = assert(perfmon.load([[
  local M = {}
  function M.work(ms) local t0 = os.clock() spin(ms) return (os.clock() - t0) * 1e6 end
  return M]], "=A", env, group))()

local mon <close> = perfmon.monitor{ "jank" }
local errors, windows = {}, perfmon.info().windows
for i = 1, events do
  local before, own = mon:snapshot(), 0
  perfmon.event(function()
    for _ = 1, 4 do
      spin(5)
      own = own + a.work(5)
    end
    spin(5)
  end)
  local charged = mon:snapshot():subtract(before).groups[group.id].cpu_us
  errors[i] = math.abs(charged - own) / own
end
windows = perfmon.info().windows - windows

local function pct(q) return 100 * stats.quantile(errors, q) end
print(("A's |error| over %d events: mean %.1f%%, median %.1f%%, p90 %.1f%%, max %.1f%%; %.1f CPU clock reads an event")
  :format(events, 100 * stats.mean(errors), pct(0.5), pct(0.9), pct(1), windows / events))

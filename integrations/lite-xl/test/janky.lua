-- mod-version:3
-- The check's janky plugin: burns PERFMON_CHECK_BURN_MS of CPU at a time,
-- BURSTS times, half in a thread of its own (core.add_thread) and half
-- in RootView:update (inside core.step), and counts what it burned with
-- os.clock: the ground truth perfmon's self time for it is checked against.
local core = require "core"
local RootView = require "core.rootview"

local BURSTS = 6
local burn_s = tonumber(os.getenv("PERFMON_CHECK_BURN_MS") or "80") / 1000
local M = { bursts = 0, burned_s = 0, done = false }

local function burn()
  local t0 = os.clock()
  local t = t0
  while t - t0 < burn_s do t = os.clock() end
  M.burned_s = M.burned_s + (t - t0)
  M.bursts = M.bursts + 1
  M.done = M.bursts >= BURSTS
end

local in_update = false
core.add_thread(function()
  while not M.done do
    coroutine.yield(0.4)
    if not M.done then burn() end
    in_update = not M.done -- the next burst in core.step
  end
end)

local update = RootView.update
function RootView:update(...)
  if in_update then
    in_update = false
    burn()
  end
  return update(self, ...)
end

return M

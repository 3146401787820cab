--- perfmon.busted.ledger: the bookkeeping of perfmon.busted, which record
-- (a test, a spec file) each stretch of a busted run's CPU time goes to.
--
-- One exact monitor spans the run.  The run is cut into stretches at its
-- boundaries (a test's start, the end of its function, a file's start and
-- end) by one snapshot each, taken outside every event (the handler opens
-- none), so that it includes everything up to that instant; the stretch
-- since the last boundary goes to the record that was current.  A test's
-- CPU time is the process's `cpu_us` over its stretch: the thread's CPU
-- clock, which the group figures are shares of, so a group never spends
-- more than its test.  No function of perfmon is replaced: a test's own
-- events, monitors and snapshots are perfmon's, as without the handler.

local perfmon = require("perfmon")

local M = {}

local Ledger = {}
Ledger.__index = Ledger

--- A record: what a test or a spec file spent, cpu_us and per group.
function M.record(fields)
  fields.cpu_us, fields.groups = 0, {}
  return fields
end

-- The core keeps each running total as a real number and gives it in
-- whole µs (truncated), so the difference of two totals is off by less
-- than 1 µs either way: a figure that cannot exceed another (a group's
-- self time its inclusive time, a group's time the process's) may pass it
-- by 1 µs.  That 1 µs is rounding, cut here at the source; more would be
-- a defect of perfmon's, and is left to show.
local function at_most(v, bound)
  if v == bound + 1 then return bound end
  return v
end

--- The CPU and self µs of a group between two of its stats (old nil: the
-- group is new), within bound (the process's µs over the same stretch).
function M.delta(new, old, bound)
  local cpu = at_most(new.cpu_us - (old and old.cpu_us or 0), bound)
  local self = at_most(new.self_us - (old and old.self_us or 0), cpu)
  return cpu, self
end

-- Adds the stretch from snapshot old to new to rec.
local function charge(rec, new, old)
  local process = new.process.cpu_us - old.process.cpu_us
  rec.cpu_us = rec.cpu_us + process
  local groups, olds = rec.groups, old.groups
  for id, st in pairs(new.groups) do
    local cpu, self = M.delta(st, olds[id], process)
    if cpu > 0 then
      local g = groups[id]
      if not g then
        g = { name = st.name, kind = st.kind, cpu_us = 0, self_us = 0 }
        groups[id] = g
      end
      g.cpu_us, g.self_us = g.cpu_us + cpu, g.self_us + self
    end
  end
end

--- Opens the run's monitor; the run's stretches begin now.
function M.open()
  local mon = perfmon.monitor{ "jank" }
  local snap = mon:snapshot()
  return setmetatable({ mon = mon, first = snap, last = snap }, Ledger)
end

--- A boundary: the stretch since the last one goes to the current record
-- (none: to no record), and rec (or none) is current from now on.
function Ledger:switch(rec)
  local snap = self.mon:snapshot()
  if self.current then charge(self.current, snap, self.last) end
  self.last, self.current = snap, rec
end

--- The run so far: the difference of the snapshots now and at its start.
function Ledger:total()
  return self.mon:snapshot():subtract(self.first)
end

--- The number of monitors open, for a test's leftovers.
function M.monitors()
  return perfmon.info().monitors
end

--- Closes the monitors a test left open that nothing references (their
-- finalizers close them).  Returns how many the test left open beyond the
-- `before` open when it began, and how many of them are open still.
function M.sweep_monitors(before)
  local left = M.monitors() - before
  if left <= 0 then return 0, 0 end
  collectgarbage()
  collectgarbage()
  return left, M.monitors() - before
end

return M

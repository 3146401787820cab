--- perfmon.busted.ledger: the bookkeeping of perfmon.busted, which record
-- (a test, a spec file) each stretch of a busted run's CPU time goes to.
--
-- One monitor spans the run: exact, or sampled (--mode=sampled), where a
-- test's CPU time is still the thread's clock at its boundaries and its
-- groups' are samples, each charged the CPU time since the sample before,
-- which may have begun before the test: a group's share of a test is then
-- cut at the test's own time.  The run is cut into stretches at its
-- boundaries (a test's start, the end of its function, a file's start and
-- end) by one read of the totals each (core.times: the CPU and self µs
-- alone, one commit, into a reused table), taken outside every event (the handler opens none), so
-- that it includes everything up to that instant; the stretch since the
-- last boundary goes to the record that was current.  A test's
-- CPU time is the process's `cpu_us` over its stretch: the thread's CPU
-- clock, which the group figures are shares of, so a group never spends
-- more than its test.  No function of perfmon is replaced: a test's own
-- events, monitors and snapshots are perfmon's, as without the handler.

local perfmon = require("perfmon")
local core = require("perfmon.loader")
local module = require("perfmon.module")

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

--- A group's CPU and self µs over a stretch, the differences of its
-- totals, within bound (the process's µs over the same stretch); sampled:
-- from samples (the ledger's header).
function M.delta(cpu, self, bound, sampled)
  if sampled then
    cpu = math.max(0, math.min(cpu, bound))
    return cpu, math.max(0, math.min(self, cpu))
  end
  cpu = at_most(cpu, bound)
  return cpu, at_most(self, cpu)
end

-- The totals at a boundary, read into buf (core.times: a flat list of
-- id, cpu_us, self_us for the process, id 0, then each live group; buf.n
-- its length); returns whether perfmon's hook is known lost.  Two buffers
-- serve every boundary in turn: a read allocates nothing.
local function read(buf)
  local n, lost = core.times(buf)
  buf.n = n
  return lost
end

-- The name and kind of group id, learnt from a snapshot the first time
-- the group spends anything.
function Ledger:describe(id)
  local g = self.names[id]
  if not g then
    for gid, st in pairs(perfmon.snapshot().groups) do
      self.names[gid] = self.names[gid] or { name = st.name, kind = st.kind }
    end
    -- collected between the read and the snapshot: a name that says so
    g = self.names[id] or { name = ("group %d (gone before its name was read)"):format(id),
      kind = "gone" }
  end
  return g
end

-- The position of group id's totals in old, or nil: where it was in new
-- (groups are listed in the order they were made), else searched.
local function position(old, id, i)
  if old[i] == id and i <= old.n then return i end
  for j = 4, old.n, 3 do
    if old[j] == id then return j end
  end
end

-- Adds the stretch from totals old to new to rec: the process's µs to
-- rec.cpu_us, and each group's that spent anything to rec.groups.
function Ledger:charge(rec, new, old)
  local process = new[2] - old[2]
  rec.cpu_us = rec.cpu_us + process
  local groups = rec.groups
  for i = 4, new.n, 3 do
    local id = new[i]
    local o = position(old, id, i)
    local cpu, own = M.delta(new[i + 1] - (o and old[o + 1] or 0),
      new[i + 2] - (o and old[o + 2] or 0), process, self.sampled)
    if cpu > 0 then
      local g = groups[id]
      if not g then
        local d = self:describe(id)
        g = { name = d.name, kind = d.kind, cpu_us = 0, self_us = 0 }
        groups[id] = g
      end
      g.cpu_us, g.self_us = g.cpu_us + cpu, g.self_us + own
    end
  end
end

--- Opens the run's monitor, of mode ("exact" or "sampled", every rate_us
-- µs of CPU time); the run's stretches begin now.
function M.open(mode, rate_us)
  local mon = perfmon.monitor{ "jank", mode = mode, rate_us = rate_us }
  local first = {}
  read(first)
  local last = table.move(first, 1, first.n, 1, { n = first.n })
  return setmetatable({ mon = mon, sampled = mon.mode == "sampled", first = first, last = last,
    spare = {}, names = {} }, Ledger)
end

--- A boundary: the stretch since the last one goes to the current record
-- (none: to no record), and rec (or none) is current from now on.
-- Returns whether perfmon's hook is known lost by now.
function Ledger:switch(rec)
  local now, last = self.spare, self.last
  local lost = read(now)
  if self.current then self:charge(self.current, now, last) end
  self.last, self.spare, self.current = now, last, rec
  return lost
end

--- The run so far: its CPU µs, and { [id] = {cpu_us, self_us} } of the
-- groups that spent anything.
function Ledger:total()
  local run = M.record{}
  self:switch(self.current)
  self:charge(run, self.last, self.first)
  return run.cpu_us, run.groups
end

return module(M)

--- perfmon.busted.leftovers: what a test or a spec file leaves open of
-- perfmon's (an event, nested loops, monitors), closed with it and noted,
-- so that it never breaks the next test and the report says whose it was.
-- The handler itself opens no event and enters no loop, so what is open
-- beyond what was open at a test's start is the test's.

local core = require("perfmon.loader")
local module = require("perfmon.module")

local M = {}

--- What a test may leave behind, counted now: { monitors open, nested
-- loops open, whether an event is open in the current loop }.
function M.count()
  local monitors, loops, event = core.counts()
  return { monitors = monitors, loops = loops, event = event }
end

--- Ends the nested loops a test entered and an event it began since
-- before (M.count() at its start; by hand, or in a coroutine it left
-- suspended inside perfmon.event), before the read
-- that ends its stretch: a read inside an event leaves the event out.
-- Returns the notes for the report (a list).
function M.end_open(before)
  local notes = {}
  local _, loops, event = core.counts()
  local n = loops - before.loops
  if n > 0 then
    for _ = 1, n do core.nested_leave() end
    notes[#notes + 1] = ("the test left %d nested loop%s open; ended with the test"):format(
      n, n > 1 and "s" or "")
    event = select(3, core.counts())
  end
  if event and not before.event then
    core.event_end()
    notes[#notes + 1] = "the test left a perfmon event open; it ended with the test"
  elseif before.event then
    -- an event commits its time when it ends: after the test, in its file
    notes[#notes + 1] = "the test ran inside an event begun before it: its time is its file's"
  end
  return notes
end

--- The monitors open beyond `before` that nothing references are
-- closed (a collection runs their finalizers); returns how many were
-- open beyond it, and how many of those were closed.  A test's are
-- checked at its end, where only those closed say the test leaked them (a
-- test may close the others in after_each); its file's at the file's end.
function M.collect_monitors(before)
  local left = core.counts() - before
  if left <= 0 then return 0, 0 end
  collectgarbage()
  return left, left - (core.counts() - before)
end

--- The note for the report on what a test left behind: the notes of
-- M.end_open, and the monitors it left open and unreferenced, closed here
-- (after its stretch: the collection is not the test's); or nil.
function M.sweep_monitors(before, notes)
  local _, closed = M.collect_monitors(before.monitors)
  if closed > 0 then
    notes[#notes + 1] = ("the test left %d perfmon monitor%s open and unreferenced;"
      .. " closed with it"):format(closed, closed > 1 and "s" or "")
  end
  return notes[1] and table.concat(notes, "; ") or nil
end

--- The note on the monitors a spec file left open, or nil.
function M.file_monitors(before)
  local left, closed = M.collect_monitors(before)
  if left == 0 then return nil end
  return ("the file left %d perfmon monitor%s open: %d unreferenced, closed; %d still open")
    :format(left, left > 1 and "s" or "", closed, left - closed)
end

return module(M)

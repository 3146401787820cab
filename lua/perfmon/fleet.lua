--- perfmon.fleet: one view of several Lua states, on any threads of the
-- process.
--
-- A state opts in by publishing its totals (fleet.publish, after its
-- events, or as often as the view should be fresh); any state reads every
-- state's last published totals back (fleet.states) or merged by kind and
-- name (fleet.snapshot).  The board is the C core's (src/fleet.c): text
-- copied in and out under one lock, so that states on other threads run
-- on while it is read.  A state that closes keeps its last totals there.

local perfmon = require("perfmon")
local core = require("perfmon.loader")
local module = require("perfmon.module")
local args = require("perfmon.args")

local fleet = {}

--- Puts snap (a snapshot of this state's monitor: totals, not a
-- difference) on the board as this state's entry, with a label (default
-- "state <entry id>"); returns the entry's id.
function fleet.publish(snap, label)
  if label ~= nil and type(label) ~= "string" then
    args.error(2, "perfmon.fleet.publish", "string expected, got " .. type(label))
  end
  -- the board keeps labels as C strings, which a NUL byte would cut
  if label and label:find("\0", 1, true) then
    args.error(2, "perfmon.fleet.publish", ("the label holds a NUL byte: %q"):format(label))
  end
  local json = args.pass_on(1, "perfmon.fleet.publish", snap, perfmon.json, "perfmon.json")
  return core.fleet_publish(json, label or "")
end

--- Every state's entry, in the order they were made: { {id, label,
-- closed, snapshot}, ... }.
function fleet.states()
  local out = {}
  for i, e in ipairs(core.fleet_entries()) do
    out[i] = { id = e.id, label = e.label ~= "" and e.label or ("state " .. e.id),
      closed = e.closed, snapshot = perfmon.snapshot_from_json(e.json) }
  end
  return out
end

--- The states' last totals merged (perfmon.merge): groups of one kind
-- and name are one; nil when no state published.
function fleet.snapshot()
  local snaps = {}
  for i, st in ipairs(fleet.states()) do snaps[i] = st.snapshot end
  return #snaps > 0 and perfmon.merge(snaps) or nil
end

return module(fleet)

-- fleet_spec.lua: perfmon.fleet from Lua, in one state (the process-wide
-- view over four threads' states is examples/fleet_host.c: ctest
-- example.fleet and, under ThreadSanitizer, tsan.fleet).

local perfmon = require("perfmon")
local fleet = require("perfmon.fleet")
local text = require("perfmon.text")

describe("perfmon.fleet", function()
  it("keeps this state's last published totals, under its label", function()
    local g = perfmon.group{ name = "fleet plugin", kind = "plugin" }
    local run = assert(perfmon.load("local t = os.clock() + 0.005 while os.clock() < t do end",
      "=fleet plugin", setmetatable({}, { __index = _G }), g))
    local mon <close> = perfmon.monitor{ "jank", "ticks" }
    perfmon.event(run)
    local id = fleet.publish(mon:snapshot(), "this state")
    perfmon.event(run)
    local last = mon:snapshot()
    assert.are.equal(id, fleet.publish(last, "this state")) -- one entry, updated
    local mine
    for _, st in ipairs(fleet.states()) do
      if st.id == id then mine = st end
    end
    assert.are.equal("this state", mine.label)
    assert.is_false(mine.closed)
    -- as perfmon.json wrote it: names as valid UTF-8 (another spec's group
    -- alive in this state may have a name that is not)
    for _, st in pairs(last.groups) do st.name, st.kind = text.utf8(st.name), text.utf8(st.kind) end
    assert.is_true(mine.snapshot:equals(last))
    local merged = fleet.snapshot()
    local found
    for _, st in pairs(merged.groups) do
      if st.name == "fleet plugin" then found = st end
    end
    assert.are.equal(last.groups[g.id].cpu_us, found.cpu_us)
    assert.are.equal(2, found.ticks)
  end)

  it("refuses what is not a snapshot or a label", function()
    assert.has_error(function() fleet.publish(42) end,
      "bad argument #1 to 'perfmon.fleet.publish' (snapshot expected, got number)")
    assert.has_error(function() fleet.publish(perfmon.snapshot(), 7) end,
      "bad argument #2 to 'perfmon.fleet.publish' (string expected, got number)")
    -- a snapshot perfmon.json refuses (edited by hand): its reason, not
    -- "snapshot expected, got table"
    local snap = perfmon.snapshot()
    snap.process.ticks = 1.5
    assert.has_error(function() fleet.publish(snap) end,
      "bad argument #1 to 'perfmon.fleet.publish' (process.ticks must be a whole number, got 1.5)")
    snap = perfmon.snapshot()
    snap.process.kind = "a\0b"
    assert.has_error(function() fleet.publish(snap) end,
      "bad argument #1 to 'perfmon.fleet.publish' (group 0's kind contains a NUL byte: \"a\\0b\")")
    assert.has_error(function() fleet.publish({}) end,
      "bad argument #1 to 'perfmon.fleet.publish' (snapshot expected, got table)")
  end)
end)

-- The one list of a group's figures: the core writes stats from it and
-- exports it (perfmon.figures); snapshots, their arithmetic and JSON, and
-- the OpenMetrics exposition read it.  Checked against what a real
-- snapshot holds.

local perfmon = require("perfmon")
local core = require("perfmon.core")
local buckets = require("perfmon.buckets")

-- The fields of a stats record that are not figures: who it is, and the
-- bucket of its longest event (derived from durations, in Lua).
local IDENTITY = { id = true, name = true, kind = true, library = true, memberships = true,
  longest = true }

local function snapshot_with_event()
  local g = perfmon.group { name = "figures", kind = "plugin" }
  local env = setmetatable({}, { __index = _G })
  local spin = assert(perfmon.load([[
    return function(ms)
      local t = os.clock() + ms / 1000
      while os.clock() < t do end
    end]], "=figures.lua", env, g))()
  local m <close> = perfmon.monitor { "jank", "ticks", "blocking", "memory" }
  perfmon.event(spin, 3)
  return m:snapshot(), g
end

describe("perfmon.figures", function()
  it("lists every figure a stats record holds, with its unit and kind", function()
    assert.equals(core.figures, perfmon.figures)
    local snap, g = snapshot_with_event()
    local by_name = {}
    for _, f in ipairs(perfmon.figures) do
      assert.is_nil(by_name[f.name], "listed twice: " .. f.name)
      by_name[f.name] = f
      assert.is_true(f.unit == "us" or f.unit == "bytes" or f.unit == "count", f.name)
      assert.is_true((f.unit == "us") == (f.name:match("_us$") ~= nil), f.name)
      assert.is_true((f.unit == "bytes") == (f.name:match("_bytes$") ~= nil), f.name)
    end
    for _, st in ipairs { snap.process, snap.groups[g.id] } do
      for k, v in pairs(st) do
        if not IDENTITY[k] then
          local f = by_name[k]
          assert.is_table(f, "a figure the list lacks: " .. k)
          if f.kind == "histogram" then
            assert.equals(f.buckets, #v)
            for i = 1, #v do assert.equals("integer", math.type(v[i])) end
          else
            assert.equals("counter", f.kind)
            assert.equals("integer", math.type(v), k)
          end
        end
      end
      for name in pairs(by_name) do assert.is_not_nil(st[name], "listed, not held: " .. name) end
    end
  end)

  it("has longest computed once, from durations, for every snapshot", function()
    local snap, g = snapshot_with_event()
    local st = snap.groups[g.id]
    assert.is_nil(core.stats().groups[g.id].longest) -- the core gives none
    assert.equals(buckets.longest(st.durations), st.longest)
    assert.is_true(st.longest >= 2) -- 3 ms: the 2-4 ms bucket
    assert.equals(buckets.longest(snap.process.durations), snap.process.longest)
    local back = perfmon.snapshot_from_json(perfmon.json(snap))
    assert.equals(st.longest, back.groups[g.id].longest)
  end)

  it("is what the OpenMetrics exposition checks a snapshot against", function()
    local snap = snapshot_with_event()
    for _, f in ipairs(perfmon.figures) do
      local copy = perfmon.snapshot_from_json(perfmon.json(snap))
      copy.process[f.name] = nil
      assert.has_error(function() perfmon.openmetrics(copy) end,
        "bad argument #1 to 'perfmon.openmetrics' (snapshot expected, got a table that is not "
        .. "one (no events or event_us: a snapshot of this perfmon?))")
    end
  end)
end)

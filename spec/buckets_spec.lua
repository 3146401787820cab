-- buckets_spec.lua: perfmon.buckets, the duration histograms as text, on a
-- real snapshot's histogram and on bad input.

local perfmon = require("perfmon")
local buckets = require("perfmon.buckets")

describe("perfmon.buckets", function()
  it("names the longest event's bucket and each bucket's own count", function()
    -- 5 events >= 1 ms, 3 of them >= 2 ms, 1 >= 8 ms
    local d = { 5, 3, 1, 1, 0, 0, 0, 0, 0, 0 }
    assert.equals(4, buckets.longest(d))
    assert.equals("8-16 ms", buckets.name(4))
    assert.equals("<1 ms", buckets.name(0))
    -- the last bucket has no upper bound: an event of 27 s is in it
    assert.equals(">= 512 ms", buckets.name(10))
    assert.equals("256-512 ms", buckets.name(9))
    assert.equals("1-2:1 >=512:2", buckets.histogram{ 3, 2, 2, 2, 2, 2, 2, 2, 2, 2 })
    assert.equals("1-2:2 2-4:2 8-16:1", buckets.histogram(d))
    assert.equals("-", buckets.histogram{ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 })
    assert.equals(0, buckets.longest{ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 })
  end)

  it("reads a snapshot's histogram as the snapshot does", function()
    local g = perfmon.group{ name = "buckets", kind = "plugin" }
    local env = setmetatable({}, { __index = _G })
    local spin = assert(perfmon.load([[
      return function(ms)
        local t = os.clock() + ms / 1000
        while os.clock() < t do end
      end]], "=buckets.lua", env, g))()
    local m <close> = perfmon.monitor{ "jank" }
    local s0 = m:snapshot()
    perfmon.event(spin, 5) -- the 4-8 ms bucket
    local st = m:snapshot():subtract(s0).groups[g.id]
    assert.equals(st.longest, buckets.longest(st.durations))
    assert.equals(st.events, 1)
    assert.truthy(buckets.histogram(st.durations):match("^%d+%-%d+:1$"))
  end)

  it("rejects bad arguments, naming them", function()
    assert.has_error(function() buckets.longest(nil) end,
      "bad argument #1 to 'perfmon.buckets.longest' (durations histogram expected, got nil)")
    assert.has_error(function() buckets.histogram{ 1, "2" } end,
      "bad argument #1 to 'perfmon.buckets.histogram' (durations histogram expected, its [2] is string)")
    assert.has_error(function() buckets.longest{ 1, {} } end,
      "bad argument #1 to 'perfmon.buckets.longest' (durations histogram expected, its [2] is table)")
    assert.equals("1-2:1 2-4:2", buckets.histogram{ 3.0, 2.0 }) -- counts read from JSON
    assert.has_error(function() buckets.name(1.5) end,
      "bad argument #1 to 'perfmon.buckets.name' (bucket number (integer 0..10) expected, got 1.5)")
    assert.has_error(function() buckets.name(-1) end,
      "bad argument #1 to 'perfmon.buckets.name' (bucket number (integer 0..10) expected, got -1)")
    assert.has_error(function() buckets.name(11) end,
      "bad argument #1 to 'perfmon.buckets.name' (bucket number (integer 0..10) expected, got 11)")
    assert.has_error(function() buckets.name("3") end,
      "bad argument #1 to 'perfmon.buckets.name' (bucket number (integer 0..10) expected, got string)")
  end)
end)

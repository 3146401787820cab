-- memory_fail_spec.lua: the memory probe counts what the host's allocator
-- grants.  A request it refuses counts nothing: Lua collects and asks
-- again, and the request granted then counts once.
--
-- Ground truth: allocount (spec/support/allocount.c), the allocator
-- beneath perfmon, tallies the bytes and blocks it granted, and refuses
-- requests on demand.  A refused request counted would add its bytes (4 KB
-- or more each) and its block, if it made one.

local allocount = require("allocount") -- before perfmon: perfmon wraps it
local perfmon = require("perfmon")

-- n lists of 1000 numbers, each array part refused as it grows by 4 KB
-- and by 8 KB, and n tables made with an array part of 4.8 KB, each
-- refused once; returns the bytes and blocks granted meanwhile.
local LISTS = [[
local src = {}
for i = 1, 300 do src[i] = i end
return function(n)
  local b0, c0 = allocount.granted()
  allocount.refuse(3 * n, 4096)
  local lists, packed = {}, {}
  for j = 1, n do
    local t = {}
    for i = 1, 1000 do t[i] = i end
    lists[j] = t
    packed[j] = table.pack(table.unpack(src))
  end
  allocount.refuse(0, 1)
  local b1, c1 = allocount.granted()
  return b1 - b0, c1 - c0
end]]

local function lists_plugin(name)
  local g = perfmon.group{ name = name, kind = "plugin" }
  local env = setmetatable({ allocount = allocount }, { __index = _G })
  return g, assert(perfmon.load(LISTS, "=" .. name, env, g))()
end

-- One event of run(n) under a monitor of probes: the group's figures, the
-- process's, and the ground truth.
local function measure(probes, g, run, n)
  local mon <close> = perfmon.monitor(probes)
  perfmon.event(run, 2) -- warm-up: every function seen
  local before, refused = mon:snapshot(), allocount.refused()
  local bytes, blocks = perfmon.event(run, n)
  local d = mon:snapshot():subtract(before)
  return d.groups[g.id], d.process, { bytes = bytes, blocks = blocks, refused = allocount.refused() - refused }
end

describe("the memory probe under refused allocations", function()
  it("counts each granted request once and no refused one, exactly", function()
    local g, run = lists_plugin("refused_exact")
    local st, process, truth = measure({ "memory" }, g, run, 100)
    assert.are.equal(300, truth.refused)
    -- the plugin's frame outside its two readings: its call and returns
    assert(st.alloc_bytes >= truth.bytes and st.alloc_bytes <= truth.bytes + 256,
      ("charged %d bytes, %d granted"):format(st.alloc_bytes, truth.bytes))
    assert(st.alloc_count >= truth.blocks and st.alloc_count <= truth.blocks + 4,
      ("charged %d blocks, %d granted"):format(st.alloc_count, truth.blocks))
    assert(process.alloc_bytes >= st.alloc_bytes)
  end)

  it("keeps the process's figures exact and the group's within the sampled tolerance", function()
    local g, run = lists_plugin("refused_sampled")
    local st, process, truth = measure({ "memory", mode = "sampled" }, g, run, 200)
    assert.are.equal(600, truth.refused)
    -- the process counts every allocation, as in exact mode; the event's
    -- bracket and the snapshot around it are the rest
    assert(process.alloc_bytes >= truth.bytes and process.alloc_bytes <= truth.bytes + 4096,
      ("the process: %d bytes, %d granted"):format(process.alloc_bytes, truth.bytes))
    assert(process.alloc_count >= truth.blocks and process.alloc_count <= truth.blocks + 64,
      ("the process: %d blocks, %d granted"):format(process.alloc_count, truth.blocks))
    -- 4.3 MB: some 260 points of 16 KB, one in each stride (stopwatch.c),
    -- good to a few percent; refused bytes counted would add four fifths
    assert(math.abs(st.alloc_bytes / truth.bytes - 1) <= 0.15,
      ("charged %d bytes, %d granted"):format(st.alloc_bytes, truth.bytes))
  end)
end)

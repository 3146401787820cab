-- memory_spec.lua: the memory probe charges what a group's code allocates,
-- bytes and blocks, inclusive (the group on the stack) and self (in the
-- innermost frame), as time is.
--
-- Ground truth: with the collector stopped nothing is freed behind the
-- code's back, so the growth of collectgarbage("count") around a piece of
-- work is what it allocated; each plugin measures its own that way.

local perfmon = require("perfmon")

local function group(name) return perfmon.group{ name = name, kind = "plugin" } end

-- A plugin whose M.run(n) makes n tables and a list of n numbers, adding
-- the bytes that took to M.bytes.  (Nothing it does frees a block: a
-- string.rep's buffer, made and freed, would count in the probe's bytes,
-- which are all that was allocated, and not in the heap's growth.)
local ALLOCATOR = [[
local M = { bytes = 0 }
function M.run(n)
  local before = collectgarbage("count")
  local t = {}
  for i = 1, n do t[i] = {} end
  local list = {}
  for i = 1, n do list[i] = i * 0.5 end
  t.list = list
  M.bytes = M.bytes + (collectgarbage("count") - before) * 1024
  return t
end
return M
]]

local function sandbox(extra)
  return setmetatable(extra or {}, { __index = _G })
end

local function measure(probes, fn)
  local mon <close> = perfmon.monitor(probes)
  local before = mon:snapshot()
  fn()
  return mon:snapshot():subtract(before)
end

describe("the memory probe", function()
  local gc_was_running
  before_each(function()
    gc_was_running = collectgarbage("isrunning")
    collectgarbage("stop")
  end)
  after_each(function()
    if gc_was_running then collectgarbage("restart") end
  end)

  it("charges a plugin the bytes and blocks its code allocates", function()
    local g = group("allocator")
    local a = assert(perfmon.load(ALLOCATOR, "=allocator", sandbox(), g))()
    local d = measure({ "memory" }, function()
      for _ = 1, 3 do perfmon.event(a.run, 1000) end
    end)
    local st = d.groups[g.id]
    -- within 64 bytes a run: the count's own rounding
    assert(math.abs(st.alloc_bytes - a.bytes) <= 3 * 64,
      ("charged %d bytes, the plugin allocated %d"):format(st.alloc_bytes, a.bytes))
    assert.are.equal(st.alloc_bytes, st.self_alloc_bytes)
    -- 1000 tables, two lists and their array parts: a few more
    assert(st.alloc_count >= 3 * 1002 and st.alloc_count <= 3 * 1010,
      ("%d blocks"):format(st.alloc_count))
    assert(d.process.alloc_bytes >= st.alloc_bytes)
  end)

  it("charges a dispatcher inclusive of the plugin it calls, and its own self", function()
    local ga, gd = group("allocator"), group("dispatcher")
    local a = assert(perfmon.load(ALLOCATOR, "=allocator", sandbox(), ga))()
    local dsp = assert(perfmon.load([[
      local M = { bytes = 0 }
      function M.run(n)
        local before = collectgarbage("count")
        local own = {}
        for i = 1, n do own[i] = ("%d"):format(i * 1000003) end
        M.bytes = M.bytes + (collectgarbage("count") - before) * 1024
        local t = allocator.run(n)
        return own, t
      end
      return M]], "=dispatcher", sandbox{ allocator = a }, gd))()
    local d = measure({ "memory" }, function()
      for _ = 1, 3 do perfmon.event(dsp.run, 500) end
    end)
    local sa, sd = d.groups[ga.id], d.groups[gd.id]
    assert(math.abs(sa.self_alloc_bytes - a.bytes) <= 3 * 64, "the allocator's self")
    assert(math.abs(sd.self_alloc_bytes - dsp.bytes) <= 3 * 64,
      ("the dispatcher's self: %d, its own %d"):format(sd.self_alloc_bytes, dsp.bytes))
    assert(math.abs(sd.alloc_bytes - (dsp.bytes + a.bytes)) <= 6 * 64, "the dispatcher, inclusive")
  end)

  it("counts nothing without the probe", function()
    local g = group("allocator")
    local a = assert(perfmon.load(ALLOCATOR, "=allocator", sandbox(), g))()
    local d = measure({ "jank" }, function() perfmon.event(a.run, 1000) end)
    assert.are.equal(0, d.groups[g.id].alloc_bytes)
    assert.are.equal(0, d.process.alloc_count)
  end)

  it("is named among the probes", function()
    assert.has_error(function() perfmon.monitor{ "memroy" } end)
    local mon <close> = perfmon.monitor{ "memory", "jank" }
    assert.is_table(mon:snapshot().process)
  end)
end)

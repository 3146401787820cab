-- Groups that come and go: a group lives while its handle, an environment
-- or source prefix it is attached to, or its chunk (a chunk group) does;
-- then it is left out of snapshots and freed, and its id is never reused.

local perfmon = require("perfmon")

local SRC = "local x = 0 for i = 1, 50 do x = x + i end "
  .. "return function(n) for _ = 1, n do x = x + 1 end return x end"

local function full_gc()
  collectgarbage()
  collectgarbage()
end

local function listed(snap, id) return snap.groups[id] ~= nil end

-- A plugin in a group of its own: returns the group's id and the plugin's
-- function; the handle and the environment are dropped unless kept.
local function plugin(name, keep)
  local g = perfmon.group{ name = name, kind = "plugin" }
  local env = setmetatable({}, { __index = _G })
  local work = assert(perfmon.load(SRC, "=" .. name, env, g))()
  if keep then keep[#keep + 1] = { g = g, env = env } end
  return g.id, work
end

describe("perfmon groups that come and go", function()

  it("a group lives while its handle or an environment holds it, then leaves the snapshots", function()
    local m <close> = perfmon.monitor{ "ticks" }
    local g = perfmon.group{ name = "held", kind = "plugin" }
    local id = g.id
    local env = setmetatable({}, { __index = _G })
    -- a chunk name made at run time: on the public path chunks are told
    -- by their source string, which a constant would keep alive
    local work = assert(perfmon.load(SRC, "=held-" .. id, env, g))()
    g = nil
    full_gc()
    work(10)
    local s = m:snapshot()
    assert.is_true(listed(s, id), "an environment it is attached to keeps it")
    assert.equals(2, s.groups[id].ticks) -- the chunk, then one call
    env, work = nil, nil
    full_gc()
    assert.is_false(listed(m:snapshot(), id), "gone with its environment and handle")
    assert.is_true(perfmon.group{ name = "next", kind = "plugin" }.id > id, "ids are never reused")
  end)

  it("a source prefix holds its group until detached", function()
    local m <close> = perfmon.monitor{ "ticks" }
    local held = perfmon.group{ name = "folder", kind = "plugin" }
    local freed = perfmon.group{ name = "folder2", kind = "plugin" }
    local held_id, freed_id = held.id, freed.id
    perfmon.attach_source("groups_spec/folder/", held)
    perfmon.attach_source("groups_spec/folder2/", freed)
    assert.is_true(perfmon.detach_source("groups_spec/folder2/", freed))
    local f = assert(load("return function() return 1 end", "@groups_spec/folder/a.lua"))()
    f()
    held, freed = nil, nil
    full_gc()
    local s = m:snapshot()
    assert.is_true(listed(s, held_id), "its prefix keeps it")
    assert.equals(2, s.groups[held_id].ticks) -- the chunk, then f
    assert.is_false(listed(s, freed_id), "detached, and its handle gone")
  end)

  it("a chunk group dies with its chunk", function()
    local m <close> = perfmon.monitor{ "ticks", "chunks" }
    local name = "groups_spec_chunk-" .. os.time()
    local f = assert(load("return function() return 2 end", "=" .. name))()
    f()
    local id
    for gid, st in pairs(m:snapshot().groups) do
      if st.kind == "chunk" and st.name == name then id = gid end
    end
    name = nil
    assert.is_not_nil(id, "the chunk's group is listed while its function lives")
    f = nil
    full_gc()
    assert.is_false(listed(m:snapshot(), id))
  end)

  it("a group that dies while its function runs is freed after it returns, and charges stay exact", function()
    local m <close> = perfmon.monitor{ "ticks" }
    local other_id, other = plugin("bystander", {})
    local g = perfmon.group{ name = "dies-running", kind = "plugin" }
    local id = g.id
    local env = setmetatable({}, { __index = _G })
    local inside
    env.probe = function()
      -- detached and dropped while its function is on the stack
      perfmon.detach(env, g)
      g = nil
      full_gc()
      inside = m:snapshot()
      other(5)
    end
    local run = assert(perfmon.load("return function() probe() return 1 end", "=dies", env, g))()
    local s0 = m:snapshot()
    assert.equals(1, run())
    assert.is_false(listed(inside, id), "dead: not listed, though its frame runs")
    other(5)
    local d = m:snapshot():subtract(s0)
    assert.is_nil(d.groups[id])
    assert.equals(2, d.groups[other_id].ticks)
    env, run = nil, nil
    full_gc()
    assert.is_false(listed(m:snapshot(), id))
  end)

  it("subtract lists no group that is gone from the newer snapshot", function()
    local m <close> = perfmon.monitor{ "ticks" }
    local id, work = plugin("short-lived")
    work(3)
    local s0 = m:snapshot()
    assert.is_true(listed(s0, id))
    work = nil
    full_gc()
    local d = m:snapshot():subtract(s0)
    assert.is_nil(d.groups[id])
  end)

  it("a host that makes and drops groups session after session stays flat", function()
    local m <close> = perfmon.monitor{ "ticks", "jank" }
    local base = perfmon.info()
    local first
    for session = 1, 20 do
      for i = 1, 300 do
        local _, work = plugin(("s%d-p%d"):format(session, i))
        perfmon.event(function() work(2) end)
      end
      full_gc()
      local n = 0
      for _ in pairs(m:snapshot().groups) do n = n + 1 end
      assert.equals(base.groups, n, "session " .. session .. ": only the groups alive are listed")
      local info = perfmon.info()
      assert.equals(base.groups, info.groups)
      first = first or info.bytes
      assert(info.bytes <= first * 1.2 + 65536,
        ("session %d: perfmon holds %d bytes, %d after the first"):format(session, info.bytes, first))
    end
  end)

  it("many dead groups are freed without a snapshot as new ones are made", function()
    local base = perfmon.info().groups
    local bytes0
    for _ = 1, 10 do
      for i = 1, 1000 do perfmon.group{ name = "g" .. i, kind = "plugin" } end
      full_gc()
      bytes0 = bytes0 or perfmon.info().bytes
    end
    for i = 1, 1000 do perfmon.group{ name = "last" .. i, kind = "plugin" } end
    assert(perfmon.info().bytes <= bytes0 * 1.2 + 65536, "dead groups piled up")
    full_gc()
    assert.equals(base, perfmon.info().groups)
  end)

  it("a dropped plugin that resumed a coroutine still alive is freed", function()
    -- The coroutine, suspended, outlives the plugin that last resumed it:
    -- nothing it keeps may hold that plugin's group (outside events the
    -- iteration never moves on, so this is the only way it goes).
    local m <close> = perfmon.monitor{ "ticks", "jank" }
    local body = load("return function() while true do coroutine.yield() end end", "=body")()
    local co = coroutine.create(body)
    local base = perfmon.info().groups
    do
      local g = perfmon.group{ name = "resumer", kind = "plugin" }
      local env = setmetatable({}, { __index = _G })
      local resume = assert(perfmon.load("return function(co) coroutine.resume(co) end",
        "=groups_spec/resumer" .. tostring(env), env, g))()
      resume(co)
      resume(co)
      assert.equals(base + 1, perfmon.info().groups)
    end
    full_gc()
    m:snapshot() -- a sweep
    assert.equals(base, perfmon.info().groups)
    assert.equals(0, perfmon.info().dead_groups, "freed, not only dead")
    assert.equals("suspended", coroutine.status(co))
  end)

  it("a collected handle brought back by a finalizer is refused with an error", function()
    local back
    do
      local g = perfmon.group{ name = "resurrected", kind = "plugin" }
      setmetatable({}, { __gc = function() back = g end })
    end
    full_gc()
    assert.is_not_nil(back)
    assert.has_error(function() perfmon.attach({}, back) end)
    local ok, err = pcall(function() return back.name end)
    assert.is_false(ok)
    assert.matches("bad argument #1 to '__index' %(perfmon.group was collected%)", err)
  end)
end)

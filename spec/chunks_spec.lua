-- chunks_spec.lua: a function is charged by the chunk it comes from, not
-- by the chunk's name: two loads of one file, stripped bytecode, and code
-- under `local _ENV = M` or a reassigned _ENV.
--
-- Where Lua's prototype tree can be read (perfmon.info().chunks is
-- "prototype"), every case below is exact.  Where it cannot (the public
-- path, PERFMON_PATH=public), chunks are told by their source name: the
-- cases that name cannot tell apart are charged to no plugin rather than
-- to the wrong one, and that is what the spec checks there.
--
-- Ground truth: each plugin's busy loop adds what it took (os.clock) to
-- M.spent; its functions touch no global (no _ENV upvalue), so only the
-- chunk can say whose they are.

local perfmon = require("perfmon")
local truth = require("spec.support.truth")
local assert_near = truth.assert_near

local exact = perfmon.info().chunks == "prototype"

-- A plugin's source: M.run(ms) spins ms and touches no global.
local PLUGIN = [[
local clock = os.clock
local M = { spent = 0 }
function M.run(ms)
  local t0 = clock()
  local t = t0 + ms / 1000
  while clock() < t do end
  M.spent = M.spent + (clock() - t0) * 1e6
end
return M
]]

local function sandbox() return setmetatable({}, { __index = _G }) end

local function group(name)
  return perfmon.group{ name = name, kind = "plugin" }
end

-- The CPU µs each group got while fn ran.
local function measure(fn, ...)
  local mon <close> = perfmon.monitor{ "jank" }
  local before = mon:snapshot()
  fn()
  local d = mon:snapshot():subtract(before)
  local out = {}
  for i, g in ipairs{ ... } do out[i] = d.groups[g.id].cpu_us end
  return table.unpack(out)
end

-- Never more than its own work (give or take the tolerance): time of
-- another plugin's code is not there.
local function at_most(got_us, own_us, what)
  assert(got_us <= own_us * (1 + truth.TOLERANCE) + truth.SLACK_US,
    ("%s: %.1f ms charged, its own work is %.1f ms"):format(what, got_us / 1000, own_us / 1000))
end

-- Its own work, where chunks are told exactly; at most that where they
-- cannot be.
local function charged(got_us, own_us, what)
  if exact then assert_near(got_us, own_us, what) else at_most(got_us, own_us, what) end
end

describe("chunks", function()
  it("tells apart two loads of one file under one short name", function()
    local ga, gb = group("a"), group("b")
    local a = assert(perfmon.load(PLUGIN, "=plugin.lua", sandbox(), ga))()
    local b = assert(perfmon.load(PLUGIN, "=plugin.lua", sandbox(), gb))()
    local ca, cb = measure(function()
      for _ = 1, 3 do perfmon.event(function() a.run(8) b.run(4) end) end
    end, ga, gb)
    charged(ca, a.spent, "the first load")
    charged(cb, b.spent, "the second load")
  end)

  it("never charges stripped host code to a stripped plugin", function()
    local gp = group("stripped plugin")
    local env = sandbox()
    perfmon.attach(env, gp)
    local fn = assert(load(PLUGIN))
    local plugin = assert(load(string.dump(fn, true), "=?", "b", env))
    local host = assert(load(string.dump(fn, true), "=?", "b"))
    local cp = measure(function()
      local p, h = plugin(), host()
      for _ = 1, 3 do perfmon.event(function() p.run(4) h.run(12) end) end
      plugin = p.spent
    end, gp)
    at_most(cp, plugin, "the stripped plugin")
    if exact then assert_near(cp, plugin, "the stripped plugin") end
  end)

  it("keeps code under `local _ENV = M` in its plugin", function()
    local gp = group("local env")
    local p = assert(perfmon.load([[
      local M = { spent = 0 }
      do
        local _ENV = { os = os, N = M }
        function N.run(ms) -- os and N are read through the table above
          local t0 = os.clock()
          local t = t0 + ms / 1000
          while os.clock() < t do end
          N.spent = N.spent + (os.clock() - t0) * 1e6
        end
      end
      return M]], "=local_env.lua", sandbox(), gp))()
    local cp = measure(function()
      for _ = 1, 3 do perfmon.event(p.run, 6) end
    end, gp)
    charged(cp, p.spent, "the plugin")
  end)

  it("keeps code defined after _ENV is reassigned in its plugin", function()
    local gp = group("reassigned env")
    local p = assert(perfmon.load([[
      local M = { spent = 0 }
      _ENV = setmetatable({}, { __index = _ENV })
      function M.run(ms) -- reads os through the new _ENV
        local t0 = os.clock()
        local t = t0 + ms / 1000
        while os.clock() < t do end
        M.spent = M.spent + (os.clock() - t0) * 1e6
      end
      return M]], "=reassigned.lua", sandbox(), gp))()
    local cp = measure(function()
      for _ = 1, 3 do perfmon.event(p.run, 6) end
    end, gp)
    charged(cp, p.spent, "the plugin")
  end)

  describe("loaded before monitoring began", function()
    -- M.run touches no global; M.name does (it has an _ENV upvalue): the
    -- one function that says which environment the chunk has
    local SOURCE = PLUGIN:gsub("return M\n$", "function M.name() return tostring(name) end\nreturn M\n")

    local function load_plugin(chunkname)
      local env = sandbox()
      local main = assert(load(SOURCE, chunkname, "t", env))
      return env, main
    end

    it("charges a plugin whose main function is gone, by its path", function()
      local g = group("early")
      local env, main = load_plugin("@/opt/host/plugins/early/init.lua (a long path, not interned)")
      local p = main()
      main = nil -- luacheck: ignore
      collectgarbage() -- the main prototype goes with its closure
      perfmon.attach(env, g) -- attached after it ran, before the monitor
      local cp = measure(function()
        for _ = 1, 3 do perfmon.event(p.run, 6) end
      end, g)
      charged(cp, p.spent, "the early plugin")
    end)

    it("charges a plugin whose main function lives on, whatever its name", function()
      local ga, gb = group("early a"), group("early b")
      local ea, ma = load_plugin("=early.lua")
      local eb, mb = load_plugin("=early.lua")
      local a, b = ma(), mb()
      perfmon.attach(ea, ga)
      perfmon.attach(eb, gb)
      local ca, cb = measure(function()
        for _ = 1, 3 do perfmon.event(function() a.run(6) b.run(3) end) end
      end, ga, gb)
      assert(ma and mb) -- alive until here
      charged(ca, a.spent, "the first load")
      charged(cb, b.spent, "the second load")
    end)

    it("tells apart two loads under one short name whose main functions are gone", function()
      -- M.run touches no global; M.label does, and shares the upvalue M
      -- with it: the load's functions tell it apart by the upvalues they
      -- share, where the name cannot
      local SHARED = PLUGIN:gsub("return M\n$", "function M.label() return tostring(name) .. M.spent end\nreturn M\n")
      local ga, gb = group("gone a"), group("gone b")
      local ea, eb = sandbox(), sandbox()
      local a = assert(load(SHARED, "=gone.lua", "t", ea))()
      local b = assert(load(SHARED, "=gone.lua", "t", eb))()
      collectgarbage() -- both main prototypes go
      perfmon.attach(ea, ga)
      perfmon.attach(eb, gb)
      local ca, cb = measure(function()
        for _ = 1, 3 do perfmon.event(function() a.run(6) b.run(3) end) end
      end, ga, gb)
      charged(ca, a.spent, "the first load")
      charged(cb, b.spent, "the second load")
    end)

    it("charges a plugin loaded before perfmon was required", function()
      -- a child Lua: the plugin loads and runs first, then perfmon comes
      local out = truth.child(([[
        local env = setmetatable({}, { __index = _G })
        local p = assert(load(%q, "@/opt/host/plugins/first/init.lua (a long path)", "t", env))()
        collectgarbage()
        local perfmon = require("perfmon")
        local g = perfmon.group{ name = "first", kind = "plugin" }
        perfmon.attach(env, g)
        local mon <close> = perfmon.monitor{ "jank" }
        local before = mon:snapshot()
        for _ = 1, 3 do perfmon.event(p.run, 6) end
        local d = mon:snapshot():subtract(before)
        io.write(d.groups[g.id].cpu_us, " ", p.spent, " ", perfmon.info().chunks)
      ]]):format(SOURCE))
      local got, spent, how = out:match("^(%d+) ([%d.e+]+) (%a+)$")
      assert(got, out)
      got, spent = tonumber(got), tonumber(spent)
      if how == "prototype" then assert_near(got, spent, "the first plugin") else at_most(got, spent, "the first plugin") end
    end)
  end)

  it("frees the groups of chunks that die, event after event, without a snapshot", function()
    -- a host that compiles a chunk per event (templates, formulas) under
    -- "chunks" and never takes a snapshot (the watcher alone): each event
    -- makes a chunk group, dead once Lua collects the chunk (a full
    -- collection every 500 events, so that when they die is the spec's,
    -- not the collector's pace in a heap other specs left)
    collectgarbage()
    local base = perfmon.info()
    local live0 = base.groups -- other specs' groups still alive in this state
    local N = math.max(20000, 4 * live0)
    local mon <close> = perfmon.monitor{ "jank", "chunks" }
    local most_groups, most_bytes = 0, 0
    for i = 1, N do
      perfmon.event(function() assert(load("return " .. i))() end)
      if i % 500 == 0 then collectgarbage() end
      local info = perfmon.info()
      most_groups = math.max(most_groups, info.groups + info.dead_groups)
      most_bytes = math.max(most_bytes, info.bytes)
    end
    -- a sweep comes at an event's end once the dead are 256 or more and
    -- outnumber the living: at most max(256, living) dead, and the chunks
    -- of the last 500 events; without it, every one of the N chunks' groups
    -- (about 750 bytes each)
    local bound = 2 * live0 + 256 + 500 + 64
    assert(most_groups <= bound, ("%d groups held after %d chunks (at most %d: %d alive before)")
      :format(most_groups, N, bound, live0))
    assert(most_bytes - base.bytes <= (bound - live0) * 1024,
      ("perfmon's memory grew from %d to %d bytes"):format(base.bytes, most_bytes))
    mon:close()
  end)

  for _, listening in ipairs{ true, false } do
    it(("frees the groups of chunks that die in a host with no events that polls the watcher (%s)")
      :format(listening and "a listener" or "no listener"), function()
      -- a host that compiles chunks under "chunks", runs no event, takes no
      -- snapshot and makes no group: it only polls the watcher from its
      -- idle loop (a full collection every 500 chunks, as above)
      local watcher = require("perfmon.watcher")
      local function listener() end
      if listening then watcher.add_listener("*", listener) end
      local mon <close> = perfmon.monitor{ "jank", "chunks" }
      collectgarbage()
      watcher.poll()
      local base = perfmon.info()
      local live0 = base.groups
      -- what a chunk's group costs while it lives: 64 run and held
      local held = {}
      for i = 1, 64 do
        held[i] = assert(load("return " .. i))
        held[i]()
      end
      local per_chunk = (perfmon.info().bytes - base.bytes) / 64
      assert(per_chunk > 0, "a chunk's group costs no memory: is \"chunks\" on?")
      held = nil -- luacheck: ignore 311
      collectgarbage()
      local N = math.max(20000, 4 * live0)
      local most_groups, most_bytes = 0, 0
      for i = 1, N do
        assert(load("return " .. i))()
        if i % 500 == 0 then collectgarbage() end
        watcher.poll()
        local info = perfmon.info()
        most_groups = math.max(most_groups, info.groups + info.dead_groups)
        most_bytes = math.max(most_bytes, info.bytes)
      end
      if listening then watcher.remove_listener("*", listener) end
      mon:close()
      -- a poll sweeps once the dead are 256 or more and outnumber the
      -- living: at most max(256, living) dead, the chunks of the last 500
      -- and the 64 held; without it, every one of the N chunks' groups
      local bound = 2 * live0 + 256 + 500 + 64
      assert(most_groups <= bound, ("%d groups held after %d chunks (at most %d: %d alive before)")
        :format(most_groups, N, bound, live0))
      -- twice what that many live chunk groups cost: room for the address
      -- maps, which grow in steps
      local most = 2 * (bound - live0) * per_chunk
      assert(most_bytes - base.bytes <= most,
        ("perfmon's memory grew from %d to %d bytes (at most %.0f more: %.0f bytes a chunk)")
          :format(base.bytes, most_bytes, most, per_chunk))
    end)
  end

  it("says how it tells chunks apart", function()
    assert.is_true(perfmon.info().chunks == "prototype" or perfmon.info().chunks == "source")
    if os.getenv("PERFMON_PATH") == "public" then
      assert.are.equal("source", perfmon.info().chunks)
    end
  end)
end)

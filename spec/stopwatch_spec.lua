-- stopwatch_spec.lua: does perfmon charge CPU time to the right groups?
--
-- Every number asserted here is checked against ground truth measured in the
-- spec itself: CPU busy loops timed with os.clock.  Each plugin defines its
-- own `spin` inside its chunk, so that the busy loop belongs to the plugin;
-- the host (this file, whose environment no group is attached to) has its
-- own `host_spin`.  Tolerances are generous (the machines are shared and
-- noisy) but always tighter than the difference between a correct and an
-- incorrect attribution.

local perfmon = require("perfmon")

local MS = 1000     -- µs per ms
local truth = require("spec.support.truth")
local TOL, SLACK = truth.TOLERANCE, truth.SLACK_US -- on a charged time
local BOUND_SLACK = 100 -- µs: rounding between a group's and the process' totals

local SPIN = "local function spin(ms) local t = os.clock() + ms / 1000 "
  .. "while os.clock() < t do end end\n"

-- A plugin: its own group, its own environment, its own chunk name (unique
-- across the file, so that no two chunks share a source name).
local seq = 0
local function plugin(name, body, extra)
  seq = seq + 1
  local g = perfmon.group{ name = name, kind = "plugin" }
  local env = setmetatable({}, { __index = _G })
  for k, v in pairs(extra or {}) do env[k] = v end
  local chunkname = ("=stopwatch_spec/%d/%s"):format(seq, name)
  local main = assert(perfmon.load(SPIN .. body, chunkname, env, g))
  return g, main(), env
end

local function host_spin(ms)
  local t = os.clock() + ms / 1000
  while os.clock() < t do end
end

-- A plugin that times its own work with os.clock: run(us) busy-loops us
-- µs and adds what it took to M.spent.
local function timed_plugin(name)
  return plugin(name, [[
    local M = { spent = 0 }
    function M.run(us)
      local t0 = os.clock()
      local t = t0 + us / 1e6
      while os.clock() < t do end
      M.spent = M.spent + (os.clock() - t0) * 1e6
    end
    return M]])
end

local function fmt(x) return ("%.1f ms"):format(x / MS) end

local function st(d, g)
  local s = d.groups[g.id]
  assert(s ~= nil, "group " .. g.name .. " missing from the snapshot")
  return s
end

local function cpu(d, g) return st(d, g).cpu_us end

local assert_near = truth.assert_near

-- The process bounds every group, and a group's inclusive time its self
-- time, in every diff.
local function assert_bounded(d)
  for id, s in pairs(d.groups) do
    for _, f in ipairs{ "cpu_us", "user_us", "system_us", "blocking_us", "self_us" } do
      assert(s[f] <= d.process[f] + BOUND_SLACK,
        ("group %d (%s): %s = %d exceeds the process' %d"):format(
          id, s.name, f, s[f], d.process[f]))
    end
    assert(s.self_us <= s.cpu_us + BOUND_SLACK,
      ("group %d (%s): self_us = %d exceeds its cpu_us %d"):format(id, s.name, s.self_us, s.cpu_us))
    assert(s.cpu_us >= 0, ("group %d (%s): negative cpu_us %d"):format(id, s.name, s.cpu_us))
  end
end

-- Runs fn between two snapshots; returns the checked diff and the CPU time
-- fn took by os.clock (µs).
local function measure(mon, fn)
  -- a collection cycle under way would be charged to whoever allocates
  -- next (a 2,000-frame recursion growing its stack): in a whole-directory
  -- run the heap is large enough for that to show
  collectgarbage()
  local before = mon:snapshot()
  local c0 = os.clock()
  fn()
  local elapsed = (os.clock() - c0) * 1e6
  local d = mon:snapshot():subtract(before)
  assert_bounded(d)
  return d, elapsed
end

local function monitor(probes)
  assert(debug.gethook() == nil, "a hook is already set before the test")
  return perfmon.monitor(probes or { "jank", "ticks" })
end

describe("perfmon stopwatch", function()

  ---------------------------------------------------------------------------
  describe("nested groups", function()

    it("charges both A and B for B's time when A calls B, and B not for A's own work", function()
      local B, b = plugin("B", [[
        local M = {}
        function M.run(ms) spin(ms) end
        return M]])
      local A, a = plugin("A", [[
        local M = {}
        function M.run() spin(20) PB.run(20) spin(20) end
        return M]], { PB = b })
      local mon <close> = monitor()
      local d, elapsed = measure(mon, function()
        perfmon.event(function()
          host_spin(20)
          a.run()
          host_spin(20)
        end)
      end)
      assert_near(cpu(d, A), 60 * MS, "A (20 own + 20 in B + 20 own)")
      assert_near(cpu(d, B), 20 * MS, "B (its own 20)")
      assert_near(d.process.cpu_us, elapsed, "process vs os.clock around the event")
      assert.are.equal(1, st(d, A).ticks)
      assert.are.equal(1, st(d, B).ticks)
    end)

    it("charges A once when A calls B which calls back into A", function()
      local A, a, envA = plugin("A", [[
        local M = {}
        function M.inner() spin(40) end
        function M.outer() spin(5) PB.mid() spin(5) end
        return M]])
      local B, b = plugin("B", [[
        local M = {}
        function M.mid() spin(5) PA.inner() spin(5) end
        return M]], { PA = a })
      envA.PB = b
      local mon <close> = monitor()
      local d, elapsed = measure(mon, function()
        perfmon.event(a.outer)
      end)
      -- A is on the stack the whole time: 5 + 5 + 40 + 5 + 5 = 60 ms, not
      -- 60 + 40 (counted again when re-entered through B)
      assert_near(cpu(d, A), 60 * MS, "A (whole call, re-entered once)")
      assert_near(cpu(d, A), elapsed, "A vs os.clock around the event")
      assert_near(cpu(d, B), 50 * MS, "B (5 + 40 in A + 5)")
      assert.are.equal(1, st(d, A).ticks, "A entered once from outside")
      assert.are.equal(1, st(d, B).ticks, "B entered once")
    end)
  end)

  ---------------------------------------------------------------------------
  describe("ticks", function()

    it("counts entries into a group from outside, not calls within it", function()
      truth.alone(pending)
      local A, a = plugin("A", [[
        local M = {}
        local function leaf(x) return x + 1 end
        local function mid(x) return leaf(x) * 2 end
        function M.f(x)
          local y = 0
          for i = 1, 10 do y = y + mid(i) + math.floor(i / 2) end
          return y
        end
        return M]])
      local mon <close> = monitor()
      local N = 7
      local d = measure(mon, function()
        perfmon.event(function()
          for _ = 1, N do a.f(1) end
        end)
        perfmon.event(function() end)
      end)
      assert.are.equal(N, st(d, A).ticks, "ticks of A")
      assert.are.equal(2, d.process.ticks, "process ticks count events")
    end)

    it("does not count a tail call within the group as an entry", function()
      local A, a = plugin("A", [[
        local M = {}
        local function helper(x) return x * 2 end
        function M.f(x) return helper(x + 1) end
        return M]])
      local mon <close> = monitor()
      local N = 5
      local d = measure(mon, function()
        perfmon.event(function()
          for _ = 1, N do a.f(1) end
        end)
      end)
      assert.are.equal(N, st(d, A).ticks, "ticks of A (one per call from the host)")
    end)

    it("counts every entry when plugins call one another in every order", function()
      -- Each ordered pair of plugins is a context of its own: 130 make more
      -- than an event keeps (docs/api.md, perfmon.info().contexts), and
      -- 260 more than are ever made at once.
      for _, n in ipairs{ 130, 260 } do
        local groups, mods = {}, {}
        for i = 1, n do
          groups[i], mods[i] = plugin("P" .. i, [[
            local M = {}
            function M.call(f) local r = f() return r end
            function M.work() return 1 end
            return M]])
        end
        local mon <close> = monitor()
        local during
        local refused = perfmon.info().contexts_refused
        local d = measure(mon, function()
          perfmon.event(function()
            for i = 1, n do
              for j = 1, n do mods[i].call(mods[j].work) end
            end
            during = perfmon.info().contexts
          end)
        end)
        refused = perfmon.info().contexts_refused - refused
        assert(during > 16384, ("%d plugins: %d contexts"):format(n, during))
        assert(during <= 65536, ("%d plugins: %d contexts"):format(n, during))
        -- the calls past the last context run in their caller's, and say
        -- so: n * n contexts (n from the host, n - 1 from each plugin),
        -- beside the few of the spec's own code
        if n * n > 65536 then
          assert(refused >= n * n - 65536, ("%d calls refused a context"):format(refused))
        else
          assert.are.equal(0, refused, "calls refused a context")
        end
        -- all freed at the event's end: what runs after it (the spec's
        -- own code, in a group where another spec attached a prefix)
        -- makes a few again
        local after = perfmon.info().contexts
        assert(after < 100, ("%d contexts after the event"):format(after))
        if n * n + n <= 65536 then
          for i = 1, n do -- from the host n times, from each other plugin once
            assert.are.equal(2 * n - 1, st(d, groups[i]).ticks, "ticks of P" .. i)
          end
        end
        local again = measure(mon, function()
          perfmon.event(function() mods[1].call(mods[2].work) end)
        end)
        assert.are.equal(1, st(again, groups[1]).ticks, "P1 after the contexts went")
        assert.are.equal(1, st(again, groups[2]).ticks, "P2 after the contexts went")
      end
    end)
  end)

  ---------------------------------------------------------------------------
  describe("coroutines", function()

    it("does not charge a suspended coroutine while the host runs", function()
      local A, a = plugin("A", [[
        local M = {}
        function M.make()
          return coroutine.create(function()
            spin(20)
            coroutine.yield()
            spin(10)
          end)
        end
        return M]])
      local mon <close> = monitor()
      local co = a.make()
      local d = measure(mon, function()
        perfmon.event(function()
          assert(coroutine.resume(co))
          host_spin(40)
          assert(coroutine.resume(co))
          host_spin(20)
        end)
      end)
      assert.are.equal("dead", coroutine.status(co))
      assert_near(cpu(d, A), 30 * MS, "A (20 + 10 of its own, not the 60 of the host)")
      assert(d.process.cpu_us >= 85 * MS, "process charged for everything: " .. fmt(d.process.cpu_us))
    end)

    it("charges the plugin that resumes a coroutine, and the coroutine's plugin for its own time", function()
      local A, a = plugin("A", [[
        local M = {}
        function M.make()
          return coroutine.create(function()
            spin(30)
            coroutine.yield()
          end)
        end
        return M]])
      local B, b = plugin("B", [[
        local M = {}
        function M.drive(co)
          spin(10)
          assert(coroutine.resume(co))
          spin(10)
        end
        return M]])
      local C, c = plugin("C", [[
        local M = {}
        function M.run(ms) spin(ms) end
        return M]])
      local mon <close> = monitor()
      local co = a.make()
      local d = measure(mon, function()
        perfmon.event(function()
          b.drive(co)
          host_spin(20)
          c.run(20)
        end)
      end)
      assert_near(cpu(d, A), 30 * MS, "A (the coroutine's own 30)")
      assert_near(cpu(d, B), 50 * MS, "B (10 + 30 while it resumes + 10)")
      assert_near(cpu(d, C), 20 * MS, "C (bystander, its own 20)")
      assert.are.equal(1, st(d, A).ticks)
      assert.are.equal(1, st(d, B).ticks)
    end)

    it("attributes coroutine.wrap generators to the plugin of their body", function()
      local A, a = plugin("A", [[
        local M = {}
        function M.gen()
          return coroutine.wrap(function()
            spin(20)
            coroutine.yield(1)
            spin(20)
            return 2
          end)
        end
        return M]])
      local B, b = plugin("B", [[
        local M = {}
        function M.pull(g) spin(5) local v = g() spin(5) return v end
        return M]])
      local mon <close> = monitor()
      local g = a.gen()
      local d = measure(mon, function()
        perfmon.event(function()
          assert.are.equal(1, g())      -- resumed by the host
          host_spin(30)
          assert.are.equal(2, b.pull(g)) -- resumed by B
          host_spin(30)
        end)
      end)
      assert_near(cpu(d, A), 40 * MS, "A (20 + 20, not the host's 60)")
      assert_near(cpu(d, B), 30 * MS, "B (5 + 20 while it resumes + 5)")
    end)

    it("attributes a coroutine created before the monitor was opened", function()
      local A, a = plugin("A", [[
        local M = {}
        function M.make()
          return coroutine.create(function()
            spin(20)
            coroutine.yield()
            spin(20)
          end)
        end
        return M]])
      local co = a.make()           -- no hook yet: created before the monitor
      local mon <close> = monitor()
      local d = measure(mon, function()
        perfmon.event(function()
          assert(coroutine.resume(co))
          host_spin(30)
          assert(coroutine.resume(co))
          host_spin(30)
        end)
      end)
      assert.are.equal("dead", coroutine.status(co))
      assert_near(cpu(d, A), 40 * MS, "A (20 + 20, not the host's 60)")
    end)

    it("attributes a coroutine suspended 20,000 frames deep before the monitor opened", function()
      -- its frames are all seeded when it is first resumed under the
      -- monitor, so that the outermost one's stopwatch runs
      local A, a = plugin("A", [[
        local M = {}
        local function rec(n)
          if n == 0 then coroutine.yield() spin(20) return 0 end
          local r = rec(n - 1)
          return r + 1
        end
        function M.make() return coroutine.create(rec) end
        return M]])
      local co = a.make()
      assert(coroutine.resume(co, 20000)) -- suspended at the bottom
      local mon <close> = monitor()
      local d = measure(mon, function()
        perfmon.event(function()
          host_spin(30)
          local ok, depth = coroutine.resume(co)
          assert(ok and depth == 20000, depth)
          host_spin(30)
        end)
      end)
      assert_near(cpu(d, A), 20 * MS, "A (20, not the host's 60)")
      assert.are.equal(1, st(d, A).ticks) -- the one resume enters A
    end)

    it("attributes a coroutine started before the monitor and resumed after it", function()
      -- the body's work after the yield is inline (no call), in a frame
      -- entered before any hook was set
      local A, a = plugin("A", [[
        local M = {}
        function M.make()
          return coroutine.create(function()
            while true do
              local ms = coroutine.yield()
              local t = os.clock() + ms / 1000
              while os.clock() < t do end
            end
          end)
        end
        return M]])
      local co = a.make()
      assert(coroutine.resume(co))  -- started, suspended at the yield
      local mon <close> = monitor()
      local d = measure(mon, function()
        perfmon.event(function()
          assert(coroutine.resume(co, 30))
          host_spin(30)
        end)
      end)
      assert.are.equal("suspended", coroutine.status(co))
      assert_near(cpu(d, A), 30 * MS, "A (the coroutine's 30)")
    end)

    it("attributes a coroutine created before the monitor and resumed through a tail call", function()
      local A, a = plugin("A", [[
        local M = {}
        local function body() spin(30) coroutine.yield() end
        function M.make() return coroutine.create(body) end
        function M.wrap() return coroutine.wrap(body) end
        return M]])
      local B, b = plugin("B", [[
        local M = {}
        function M.resume(co) return coroutine.resume(co) end
        function M.call(g) return g() end
        return M]])
      local co, gen = a.make(), a.wrap() -- no hook yet
      local mon <close> = monitor()
      local d = measure(mon, function()
        perfmon.event(function()
          assert(b.resume(co))
          b.call(gen)
          host_spin(30)
        end)
      end)
      assert.are.equal("suspended", coroutine.status(co))
      assert_near(cpu(d, A), 60 * MS, "A (2 x 30 in its coroutines)")
      assert_near(cpu(d, B), 60 * MS, "B (while it resumes them)")
    end)
  end)

  ---------------------------------------------------------------------------
  describe("errors", function()

    local function failing_plugin()
      return plugin("A", [[
        local M = {}
        function M.explicit() spin(30) error("boom") end
        function M.runtime() spin(30) local t = nil; return t.field end
        local function rec(n)
          if n == 0 then spin(30) error("deep") end
          return 1 + rec(n - 1)
        end
        function M.deep() return rec(2000) end
        -- recursion through a C function (string.gsub) until "C stack overflow"
        local function overflow() return (string.gsub("x", "x", overflow)) end
        function M.overflow() spin(30) return overflow() end
        return M]])
    end

    for _, case in ipairs{ "explicit", "runtime", "deep" } do
      it("does not charge a plugin for host work after its " .. case .. " error is caught by pcall", function()
        local A, a = failing_plugin()
        local mon <close> = monitor()
        local d = measure(mon, function()
          perfmon.event(function()
            local ok = pcall(a[case])
            assert.is_false(ok)
            host_spin(50)
          end)
        end)
        assert_near(cpu(d, A), 30 * MS, "A (its 30 before the error, not the host's 50)")
      end)
    end

    it("does not charge a plugin for host work after a C stack overflow", function()
      local A, a = failing_plugin()
      local mon <close> = monitor()
      local d = measure(mon, function()
        perfmon.event(function()
          local ok, msg = pcall(a.overflow)
          assert.is_false(ok)
          assert.matches("stack overflow", msg)
          host_spin(50)
        end)
      end)
      assert_near(cpu(d, A), 30 * MS, "A (its 30 and ~200 nested calls, not the host's 50)")
    end)

    it("handles xpcall with a message handler", function()
      local A, a = failing_plugin()
      local B, b = plugin("B", [[
        local M = {}
        function M.handler(msg) spin(20) return "handled: " .. tostring(msg) end
        return M]])
      local mon <close> = monitor()
      local d = measure(mon, function()
        perfmon.event(function()
          local ok, msg = xpcall(a.explicit, debug.traceback)
          assert.is_false(ok)
          assert.matches("boom", msg)
          host_spin(40)
        end)
        perfmon.event(function()
          local ok, msg = xpcall(a.runtime, b.handler)
          assert.is_false(ok)
          assert.matches("^handled:", msg)
          host_spin(40)
        end)
      end)
      -- A: 30 + 30 of its own; B's handler runs on top of A's frames
      local a_us = cpu(d, A)
      assert(a_us >= 60 * MS * (1 - TOL) - SLACK and a_us <= 80 * MS * (1 + TOL) + SLACK,
        "A: charged " .. fmt(a_us) .. ", expected 60..80 ms (not the host's 2 x 40 after)")
      assert_near(cpu(d, B), 20 * MS, "B (the handler's 20)")
    end)

    it("does not charge a coroutine that died with an error for what runs after", function()
      local A, a = plugin("A", [[
        local M = {}
        function M.make()
          return coroutine.create(function() spin(20) error("dead") end)
        end
        function M.wrapped()
          return coroutine.wrap(function() spin(20) local x = nil; return x.y end)
        end
        return M]])
      local B, b = plugin("B", [[
        local M = {}
        function M.drive(co)
          local ok = coroutine.resume(co)
          assert(not ok)
          spin(30)
        end
        return M]])
      local mon <close> = monitor()
      local co1, co2, gen = a.make(), a.make(), a.wrapped()
      local d = measure(mon, function()
        perfmon.event(function()
          assert.is_false((coroutine.resume(co1)))  -- resumed by the host
          host_spin(30)
          b.drive(co2)                               -- resumed by B
          host_spin(30)
          assert.is_false((pcall(gen)))              -- wrap: the error crosses into the host
          host_spin(30)
        end)
      end)
      assert.are.equal("dead", coroutine.status(co1))
      assert_near(cpu(d, A), 60 * MS, "A (3 x 20 of its own, not the host's 90 or B's 30)")
      assert_near(cpu(d, B), 50 * MS, "B (20 while it resumes + 30)")
    end)
  end)

  ---------------------------------------------------------------------------
  describe("durations", function()

    it("counts a 6 ms event in durations[1..3] only", function()
      local A, a = plugin("A", [[
        local M = {}
        function M.run(ms) spin(ms) end
        return M]])
      local B, b = plugin("B", [[
        local M = {}
        function M.noop() return 1 end
        return M]])
      local mon <close> = monitor()
      local d = measure(mon, function()
        perfmon.event(function() a.run(6) b.noop() end)
      end)
      local sa, sb = st(d, A), st(d, B)
      assert_near(sa.cpu_us, 6 * MS, "A")
      assert.are.same({ 1, 1, 1, 0, 0, 0, 0, 0, 0, 0 }, sa.durations)
      assert.are.equal(3, sa.longest)
      -- B ran (one tick) but for no measurable time
      assert.are.equal(1, sb.ticks)
      assert.are.same({ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, sb.durations)
      assert.are.equal(0, sb.longest)
      for k = 1, 3 do
        assert.are.equal(1, d.process.durations[k], "process durations[" .. k .. "]")
      end
    end)

    it("counts events, not entries: two 3 ms entries in one event count as one 6 ms event", function()
      local A, a = plugin("A", [[
        local M = {}
        function M.run(ms) spin(ms) end
        return M]])
      local mon <close> = monitor()
      local d = measure(mon, function()
        perfmon.event(function() a.run(3) a.run(3) end)
        perfmon.event(function() a.run(6) end)
      end)
      local sa = st(d, A)
      assert_near(sa.cpu_us, 12 * MS, "A")
      assert.are.same({ 2, 2, 2, 0, 0, 0, 0, 0, 0, 0 }, sa.durations)
      assert.are.equal(3, sa.longest)
      assert.are.equal(3, sa.ticks)
    end)

    it("counts the events each group ran in and sums its CPU time over them", function()
      truth.alone(pending)
      local A, a = plugin("A", [[
        local M = {}
        function M.run(ms) local t0 = os.clock() spin(ms) return os.clock() - t0 end
        return M]])
      local B, b = plugin("B", [[
        local M = {}
        function M.noop() return 1 end
        return M]])
      local C = plugin("C", "return {}") -- never runs under the monitor
      local mon <close> = monitor()
      local lengths = { 2, 5, 9, 3, 12, 1 }
      local a_us, event_us, n = 0, 0, 0
      local d = measure(mon, function()
        for i, ms in ipairs(lengths) do
          local c0 = os.clock()
          perfmon.event(function()
            a_us = a_us + a.run(ms) * 1e6
            if i % 2 == 0 then b.noop() end
          end)
          event_us = event_us + (os.clock() - c0) * 1e6
          n = n + 1
        end
        for _ = 1, 4 do perfmon.event(host_spin, 2) end -- events neither A nor B runs in
        host_spin(5)                                    -- outside any event
      end)
      local sa, sb, sc = st(d, A), st(d, B), st(d, C)
      assert.are.equal(n, sa.events)
      assert.are.equal(n // 2, sb.events)
      assert.are.equal(0, sc.events)
      assert.are.equal(n + 4, d.process.events)
      assert_near(sa.event_us, a_us, "A's event_us")
      assert(sb.event_us < 1000, ("B's event_us %d for a few calls"):format(sb.event_us))
      assert.are.equal(0, sc.event_us)
      -- the process's events: A's, and the host's 4 x 2 ms; not the 5 ms outside
      assert_near(d.process.event_us, event_us + 8 * MS, "the process's event_us")
      assert(d.process.event_us <= d.process.cpu_us + BOUND_SLACK, "event_us above cpu_us")
    end)

    it("counts thousands of short events exactly, their time within the windows", function()
      truth.alone(pending)
      local A, a = timed_plugin("A")
      local mon <close> = monitor()
      local n = 3000
      local d = measure(mon, function()
        for _ = 1, n do perfmon.event(a.run, 30) end
      end)
      assert.are.equal(n, st(d, A).events)
      assert.are.equal(n, d.process.events)
      assert_near(st(d, A).event_us, a.spent, "A's event_us")
    end)

    it("counts no events without the jank probe, as durations", function()
      truth.alone(pending)
      local A, a = plugin("A", [[
        local M = {}
        function M.run(ms) spin(ms) end
        return M]])
      local mon <close> = monitor{ "ticks", "blocking" }
      local d = measure(mon, function()
        for _ = 1, 5 do perfmon.event(a.run, 2) end
      end)
      assert.are.equal(5, st(d, A).ticks)
      assert.are.equal(0, st(d, A).events)
      assert.are.equal(0, d.process.events)
      assert.are.equal(0, d.process.event_us)
    end)
  end)

  ---------------------------------------------------------------------------
  describe("short events", function()
    -- Events shorter than the window (250 µs) share one read of the
    -- thread's CPU clock; each plugin times its own work with os.clock.

    it("charges thousands of short events exactly, with a CPU clock read per window", function()
      truth.alone(pending)
      local A, a = timed_plugin("A")
      local B, b = timed_plugin("B")
      local mon <close> = monitor()
      local n = 2000
      local w0 = perfmon.info().windows
      local d = measure(mon, function()
        for _ = 1, n do
          perfmon.event(function() a.run(20) b.run(10) end)
        end
      end)
      local windows = perfmon.info().windows - w0
      assert_near(cpu(d, A), a.spent, "A")
      assert_near(cpu(d, B), b.spent, "B")
      assert.are.equal(n, st(d, A).ticks)
      assert.are.equal(n, st(d, B).ticks)
      assert.are.equal(n, d.process.ticks)
      -- A 30 µs event reaches no bucket, unless it really took a
      -- millisecond of CPU time: in a loaded virtual machine the thread's
      -- CPU clock (and os.clock) can jump by a millisecond or more that was
      -- not the program's work (under two CPU hogs, 1 to 3 in 20,000 such
      -- events took 1-4 ms by os.clock with the collector stopped, and
      -- perfmon's histogram counted as many).
      for _, s in ipairs{ st(d, A), d.process } do
        assert(s.durations[1] <= n / 100, ("%d of %d short events in durations[1]"):format(s.durations[1], n))
      end
      assert(windows < n / 2, ("%d CPU clock reads for %d events of 30 µs"):format(windows, n))
    end)

    it("reads no CPU clock when no probe needs one (ticks alone)", function()
      truth.alone(pending)
      local A, a = timed_plugin("A")
      local mon <close> = monitor{ "ticks" }
      local n = 500
      local w0 = perfmon.info().windows
      local d = measure(mon, function()
        for _ = 1, n do perfmon.event(function() a.run(5) end) end
      end)
      assert.are.equal(0, perfmon.info().windows - w0)
      assert.are.equal(n, st(d, A).ticks)
      assert.are.equal(n, d.process.ticks)
    end)

    it("reads the cycle counter at each change of group, and at no call that stays in one", function()
      truth.alone(pending)
      local _, a = timed_plugin("A")
      local _, b = plugin("B", [[
        local M = {}
        local function step(x) return x + 1 end
        function M.run_many(n)
          local x = 0
          for _ = 1, n do x = step(x) end
          return x
        end
        return M]])
      local mon <close> = monitor{ "jank" }
      local n = 300
      local r0 = perfmon.info().cycle_reads
      measure(mon, function()
        for _ = 1, n do a.run(1) end -- host -> A and back: two changes
      end)
      local crossing = perfmon.info().cycle_reads - r0
      assert(crossing >= 2 * n, ("%d reads for %d calls into A"):format(crossing, n))
      r0 = perfmon.info().cycle_reads
      measure(mon, function()
        b.run_many(n) -- one change into B, then n calls inside it
      end)
      local inside = perfmon.info().cycle_reads - r0
      assert(inside < n / 2, ("%d reads for %d calls inside B"):format(inside, n))
    end)

    it("gives a long event among short ones its own durations", function()
      local A, a = timed_plugin("A")
      local mon <close> = monitor()
      local d = measure(mon, function()
        for _ = 1, 200 do perfmon.event(a.run, 5) end
        perfmon.event(a.run, 6000)
        for _ = 1, 200 do perfmon.event(a.run, 5) end
      end)
      assert_near(cpu(d, A), a.spent, "A")
      assert.are.same({ 1, 1, 1, 0, 0, 0, 0, 0, 0, 0 }, st(d, A).durations)
      assert.are.same({ 1, 1, 1, 0, 0, 0, 0, 0, 0, 0 }, d.process.durations)
      assert.are.equal(401, st(d, A).ticks)
    end)
  end)

  ---------------------------------------------------------------------------
  describe("nested event loops", function()

    it("does not charge the plugin that spun a nested loop for what runs inside", function()
      local B, b = plugin("B", [[
        local M = {}
        function M.run(ms) spin(ms) end
        return M]])
      local A, a = plugin("A", [[
        local M = {}
        function M.run() spin(10) host_nested() end
        function M.tick() spin(10) end
        return M]], {
        host_nested = function()
          perfmon.nested_loop(function()
            perfmon.event(function() b.run(30) end)
          end)
        end,
      })
      local mon <close> = monitor()
      local d, elapsed = measure(mon, function()
        perfmon.event(function()
          a.run()
          a.tick()
          host_spin(60)
        end)
      end)
      assert_near(cpu(d, B), 30 * MS, "B (inside the nested loop)")
      assert_near(cpu(d, A), 20 * MS, "A (its 10 before the nested loop + 10, not B's 30)")
      assert_near(d.process.cpu_us, elapsed, "process")
    end)

    it("lets a coroutine suspended inside a nested loop take it along", function()
      local B, b = plugin("B", [[
        local M = {}
        function M.run(ms) spin(ms) end
        return M]])
      local A, a = plugin("A", [[
        local M = {}
        function M.run(ms) spin(ms) end
        return M]])
      local co = coroutine.wrap(function()
        perfmon.nested_loop(function()
          perfmon.event(function() b.run(10) end)
          coroutine.yield()
          perfmon.event(function() b.run(10) end)
        end)
        return "left"
      end)
      local mon <close> = monitor()
      local d = measure(mon, function()
        -- the host's event resumes the coroutine, which yields back from
        -- inside its nested loop: the host's loop is the current one again
        perfmon.event(function() co() a.run(5) end)
        perfmon.event(function() a.run(15) end)
        -- resumed, the coroutine is back in its nested loop, and leaves it
        perfmon.event(function() assert.are.equal("left", co()) end)
        perfmon.event(function() a.run(5) end)
      end)
      assert_near(cpu(d, B), 20 * MS, "B (its two events inside the nested loop)")
      assert_near(cpu(d, A), 25 * MS, "A (the host's events)")
      -- every loop is left: no event is open, no nested loop either
      assert.has_error(perfmon.event_end)
      assert.has_error(require("perfmon.loader").nested_leave)
    end)
  end)

  ---------------------------------------------------------------------------
  describe("blocking", function()

    local function blocking_plugins()
      local A, a = plugin("A", [[
        local M = {}
        function M.wait()
          spin(5)
          perfmon.blocking(function() os.execute("sleep 0.03") end)
        end
        return M]], { perfmon = perfmon })
      local B, b = plugin("B", [[
        local M = {}
        function M.call(f) spin(2) f() end
        function M.run(ms) spin(ms) end
        return M]])
      return A, a, B, b
    end

    it("charges no blocking time while a coroutine is suspended inside a blocking call", function()
      -- the coroutine's blocking call waits no more while it is suspended:
      -- the host's and B's CPU time meanwhile is theirs, not blocked
      local B, b = plugin("B", [[
        local M = {}
        function M.run(ms) spin(ms) end
        return M]])
      local co = coroutine.create(function()
        perfmon.blocking(function() coroutine.yield() end)
      end)
      local mon <close> = monitor{ "jank", "blocking" }
      local spent
      local d = measure(mon, function()
        perfmon.event(function()
          assert(coroutine.resume(co)) -- suspended inside the blocking call
          local t0 = os.clock()
          b.run(30)
          spent = (os.clock() - t0) * 1e6
          assert(coroutine.resume(co)) -- the blocking call ends
        end)
      end)
      assert.are.equal("dead", coroutine.status(co))
      assert_near(cpu(d, B), spent, "B, while the coroutine is suspended")
      assert(d.process.blocking_us < 5 * MS, d.process.blocking_us .. " µs of blocking")
    end)

    it("counts another coroutine's blocking call while one is suspended inside its own", function()
      local suspended = coroutine.create(function()
        perfmon.blocking(function() coroutine.yield() end)
      end)
      local wall_us = require("perfmon.core").wall_us
      local waited
      local waiter = coroutine.create(function()
        perfmon.blocking(function()
          local t0 = wall_us()
          os.execute("sleep 0.05")
          waited = wall_us() - t0
        end)
      end)
      local mon <close> = monitor{ "jank", "blocking" }
      assert(coroutine.resume(suspended))
      local d = measure(mon, function()
        perfmon.event(function() assert(coroutine.resume(waiter)) end)
      end)
      assert(coroutine.resume(suspended))
      assert_near(d.process.blocking_us, waited, "the waiter's sleep")
    end)

    it("ends a blocking call left suspended when monitoring stops, or never", function()
      local function suspended_inside()
        local co = coroutine.create(function()
          perfmon.blocking(function() coroutine.yield() end)
        end)
        assert(coroutine.resume(co))
        return co
      end
      local co, abandoned
      do
        local _ <close> = monitor{ "jank", "blocking" }
        co, abandoned = suspended_inside(), suspended_inside()
      end -- the monitor closes with both suspended inside
      local ok, err = coroutine.resume(co) -- its blocking call ends: no misuse
      assert.is_true(ok, err)
      -- the abandoned one waits no more: a blocking call made later counts
      local mon <close> = monitor{ "jank", "blocking" }
      local s0 = mon:snapshot()
      perfmon.blocking(os.execute, "sleep 0.02")
      local d = mon:snapshot():subtract(s0)
      assert(d.process.blocking_us >= 15 * MS, d.process.blocking_us .. " µs of blocking")
      assert.are.equal("suspended", coroutine.status(abandoned))
      -- closed, its blocking call ends: nothing is left open for later specs
      assert(coroutine.close(abandoned))
    end)

    it("charges a blocking call's wall time to the groups running around it", function()
      local A, a, B, b = blocking_plugins()
      local C, c = plugin("C", [[
        local M = {}
        function M.run(ms) spin(ms) end
        return M]])
      local mon <close> = monitor{ "jank", "blocking" }
      local d = measure(mon, function()
        perfmon.event(function()
          c.run(5)
          b.call(a.wait)     -- B calls A, A blocks
          c.run(5)
        end)
      end)
      local ab, bb = st(d, A).blocking_us, st(d, B).blocking_us
      assert(ab >= 29 * MS and ab <= d.time,
        ("A: blocking %s, expected >= 29 ms and <= the %s elapsed"):format(fmt(ab), fmt(d.time)))
      assert(math.abs(bb - ab) <= 1, ("B (around A): blocking %d vs A's %d"):format(bb, ab))
      assert(math.abs(d.process.blocking_us - ab) <= 1,
        ("process blocking %d vs A's %d"):format(d.process.blocking_us, ab))
      assert.are.equal(0, st(d, C).blocking_us, "C was not running")
    end)

    it("charges no group for a blocking call made by the host", function()
      local A, _, B, b = blocking_plugins()
      local mon <close> = monitor{ "jank", "blocking" }
      local d = measure(mon, function()
        perfmon.event(function()
          b.run(5)
          perfmon.blocking(function() os.execute("sleep 0.03") end)
          b.run(5)
        end)
      end)
      assert(d.process.blocking_us >= 29 * MS and d.process.blocking_us <= d.time,
        "process blocking " .. fmt(d.process.blocking_us))
      assert.are.equal(0, st(d, B).blocking_us, "B was not running during the blocking call")
      assert.are.equal(0, st(d, A).blocking_us, "A did not run")
    end)

    it("counts no blocking time without the blocking probe", function()
      truth.alone(pending)
      local A, a = blocking_plugins()
      local mon <close> = monitor{ "jank" }
      local d = measure(mon, function()
        perfmon.event(a.wait)
      end)
      assert.are.equal(0, st(d, A).blocking_us)
      assert.are.equal(0, d.process.blocking_us)
    end)

    it("does not move CPU time between groups when a blocking call happens in the event", function()
      local A, a, B, b = blocking_plugins()
      local mon <close> = monitor{ "jank", "blocking" }
      -- plugin A blocks: 5 ms of CPU, then ~30 ms asleep
      local d1 = measure(mon, function()
        perfmon.event(function()
          b.run(20)
          a.wait()
        end)
      end)
      -- the host blocks between two runs of B
      local d2 = measure(mon, function()
        perfmon.event(function()
          b.run(10)
          perfmon.blocking(function() os.execute("sleep 0.03") end)
          b.run(10)
        end)
      end)
      assert_near(cpu(d1, B), 20 * MS, "B (20 ms of CPU; A blocked in the same event)")
      -- A spins 5 ms and forks a shell: a few ms of CPU, not B's share
      assert(cpu(d1, A) <= 5 * MS * (1 + TOL) + SLACK + 2 * MS,
        "A: charged " .. fmt(cpu(d1, A)) .. " of CPU for 5 ms of spinning and a sleep")
      assert_near(cpu(d2, B), 20 * MS, "B (20 ms of CPU; the host blocked in the same event)")
    end)

    -- Cycles inside a blocking call are taken from the measures around it
    -- when it ends; a measure that began inside it must lose only the part
    -- after its beginning (it once lost all of it, and the event its time).
    it("keeps the time of an event that begins inside a blocking call", function()
      local _, _, B, b = blocking_plugins()
      local mon <close> = monitor{ "jank", "blocking" }
      local d = measure(mon, function()
        perfmon.blocking(function()
          os.execute("sleep 0.03")
          perfmon.event_begin() -- the input came: the event begins in the wait
        end)
        b.run(10)
        perfmon.event_end()
      end)
      assert_near(cpu(d, B), 10 * MS, "B (10 ms of CPU after the wait)")
      assert.are.equal(1, st(d, B).durations[4], "B's event: 8 ms or more")
      assert.are.equal(1, d.process.durations[4], "the event: 8 ms or more")
    end)

    it("charges the code that runs inside a blocking call (a nested event)", function()
      local _, _, B, b = blocking_plugins()
      local mon <close> = monitor{ "jank", "blocking" }
      local d = measure(mon, function()
        perfmon.blocking(function()
          perfmon.event(function() b.run(10) end)
          os.execute("sleep 0.03")
        end)
      end)
      assert_near(cpu(d, B), 10 * MS, "B (10 ms of CPU inside the blocking call)")
    end)

    -- After an iteration's end inside the call, a call back into the plugin
    -- that made it (from the host's code, another group's) runs on the
    -- CPU: it was charged nothing when it found the same context again, and
    -- charged when the contexts had gone meanwhile (past 16384 of them).
    it("charges the plugin that made a blocking call for its work after an event inside", function()
      local G, p = plugin("Blocker", [[
        local M = {}
        function M.block(fn) perfmon.blocking(fn) end
        function M.run(ms) spin(ms) end
        return M]], { perfmon = perfmon })
      local _, host = plugin("Host", [[
        return function(p) perfmon.event(function() end) p.run(20) end]], { perfmon = perfmon })
      local mon <close> = monitor{ "jank", "blocking" }
      local d = measure(mon, function()
        p.block(function() host(p) end)
      end)
      assert_near(cpu(d, G), 20 * MS, "Blocker (20 ms called back after the event)")
    end)

    -- The cycle counter runs while the thread is off the CPU (preempted by
    -- another process, or waiting in a call nobody marked).  Sleeping
    -- unmarked is that, on demand: with one CPU clock read per event, B's
    -- 10 ms would get a third of the event's CPU time for its third of the
    -- cycles.
    it("gives a group its own CPU time when the thread is off the CPU around it", function()
      local _, _, B, b = blocking_plugins()
      local mon <close> = monitor()
      local w0 = perfmon.info().windows
      local d, elapsed = measure(mon, function()
        perfmon.event(function()
          os.execute("sleep 0.03")
          b.run(10)
          os.execute("sleep 0.03")
        end)
      end)
      assert_near(cpu(d, B), 10 * MS, "B (10 ms of CPU between two unmarked sleeps)")
      assert_near(d.process.cpu_us, elapsed, "process")
      assert(perfmon.info().windows - w0 >= 3, "B's run did not end a CPU-time window")
    end)
  end)

  ---------------------------------------------------------------------------
  describe("tail calls", function()

    it("charges B, not A, after A tail-calls into B", function()
      local B, b = plugin("B", [[
        local M = {}
        function M.run(ms) spin(ms) return ms end
        return M]])
      local A, a = plugin("A", [[
        local M = {}
        function M.run() spin(30) return PB.run(30) end
        return M]], { PB = b })
      local mon <close> = monitor()
      local d = measure(mon, function()
        perfmon.event(function()
          assert.are.equal(30, a.run())
        end)
      end)
      assert_near(cpu(d, B), 30 * MS, "B")
      assert_near(cpu(d, A), 30 * MS, "A (its 30 before the tail call, not B's 30)")
      assert.are.equal(1, st(d, A).ticks)
      assert.are.equal(1, st(d, B).ticks)
    end)

    it("keeps charging A across a tail call within A", function()
      local A, a = plugin("A", [[
        local M = {}
        local function second() spin(20) end
        function M.run() spin(20) return second() end
        return M]])
      local mon <close> = monitor()
      local d = measure(mon, function()
        perfmon.event(function() a.run() host_spin(30) end)
      end)
      assert_near(cpu(d, A), 40 * MS, "A (20 + 20, not the host's 30)")
    end)
  end)

  ---------------------------------------------------------------------------
  describe("metamethods and C callbacks", function()

    local function meta_plugin()
      return plugin("A", [[
        local M = { spent = 0 }
        local function timed(ms)
          local t0 = os.clock()
          spin(ms)
          M.spent = M.spent + (os.clock() - t0) * 1e6
        end
        local mt = {
          __index = function(t, k) timed(20) return k end,
          __add = function(x, y) timed(20) return 42 end,
        }
        function M.object() return setmetatable({}, mt) end
        function M.cmp(x, y) timed(0.25) return x < y end
        function M.repl(s) timed(5) return s:upper() end
        return M]])
    end

    it("charges a plugin's __index and __add invoked by the host", function()
      local A, a = meta_plugin()
      local obj = a.object()
      local mon <close> = monitor()
      local d = measure(mon, function()
        perfmon.event(function()
          host_spin(20)
          assert.are.equal("missing", obj.missing)
          host_spin(20)
          assert.are.equal(42, obj + 1)
          host_spin(20)
        end)
      end)
      assert(a.spent >= 40 * MS)
      assert_near(cpu(d, A), a.spent, "A (its metamethods, not the host's 60)")
      assert.are.equal(2, st(d, A).ticks)
    end)

    it("charges a plugin's table.sort comparator called by the host", function()
      local A, a = meta_plugin()
      local t = {}
      for i = 1, 40 do t[i] = (i * 7919) % 41 end
      local mon <close> = monitor()
      local d = measure(mon, function()
        perfmon.event(function()
          table.sort(t, a.cmp)
          host_spin(30)
        end)
      end)
      for i = 2, #t do assert(t[i - 1] <= t[i]) end
      assert(a.spent >= 20 * MS, "comparator spun " .. fmt(a.spent))
      assert_near(cpu(d, A), a.spent, "A (its comparator, not the host's 30)")
    end)

    it("charges a plugin's string.gsub callback called by the host", function()
      local A, a = meta_plugin()
      local mon <close> = monitor()
      local out
      local d = measure(mon, function()
        perfmon.event(function()
          out = ("a b c d e f"):gsub("%a", a.repl)
          host_spin(30)
        end)
      end)
      assert.are.equal("A B C D E F", out)
      assert(a.spent >= 30 * MS)
      assert_near(cpu(d, A), a.spent, "A (its callback, not the host's 30)")
    end)
  end)

  ---------------------------------------------------------------------------
  describe("__close and __gc", function()

    it("charges a plugin's __close handler run when the host's block exits", function()
      local A, a = plugin("A", [[
        local M = {}
        function M.closer(ms)
          return setmetatable({}, { __close = function() spin(ms) end })
        end
        return M]])
      local mon <close> = monitor()
      local d = measure(mon, function()
        perfmon.event(function()
          host_spin(20)
          do
            local _ <close> = a.closer(30)
            host_spin(20)
          end
          host_spin(20)
        end)
      end)
      assert_near(cpu(d, A), 30 * MS, "A (its __close, not the host's 60)")
    end)

    it("charges a plugin's __close handler run while an error unwinds", function()
      local A, a = plugin("A", [[
        local M = {}
        function M.fail()
          local x <close> = setmetatable({}, { __close = function() spin(20) end })
          spin(10)
          error("boom")
        end
        return M]])
      local mon <close> = monitor()
      local d = measure(mon, function()
        perfmon.event(function()
          assert.is_false((pcall(a.fail)))
          host_spin(40)
        end)
      end)
      assert_near(cpu(d, A), 30 * MS, "A (10 + its __close 20, not the host's 40)")
    end)

    it("charges a plugin's pending __close handler run by coroutine.close from the host", function()
      local A, a = plugin("A", [[
        local M = {}
        function M.make()
          return coroutine.create(function()
            local x <close> = setmetatable({}, { __close = function() spin(20) end })
            spin(10)
            coroutine.yield()
          end)
        end
        return M]])
      local mon <close> = monitor()
      local co = a.make()
      local d = measure(mon, function()
        perfmon.event(function()
          assert(coroutine.resume(co))
          host_spin(20)
          assert(coroutine.close(co))
          host_spin(30)
        end)
      end)
      assert.are.equal("dead", coroutine.status(co))
      assert_near(cpu(d, A), 30 * MS, "A (10 + its __close 20, not the host's 50)")
    end)

    it("survives a plugin's __gc handler and keeps attributing afterwards", function()
      local A, a = plugin("A", [[
        local M = {}
        function M.garbage(ms)
          setmetatable({}, { __gc = function() spin(ms) end })
        end
        function M.collect() spin(5) collectgarbage() collectgarbage() end
        function M.run(ms) spin(ms) end
        return M]])
      local C, c = plugin("C", [[
        local M = {}
        function M.run(ms) spin(ms) end
        return M]])
      local mon <close> = monitor()
      -- finalizers run with hooks off: the time goes to what is on the stack
      local d1 = measure(mon, function()
        perfmon.event(function()
          c.run(10)
          a.garbage(20)
          a.collect()      -- A itself runs the collection: A is on the stack
          c.run(10)
        end)
      end)
      assert(cpu(d1, A) >= 25 * MS * (1 - TOL) - SLACK,
        "A (5 + its finalizer's 20, run from A): " .. fmt(cpu(d1, A)))
      assert_near(cpu(d1, C), 20 * MS, "C (bystander)")
      -- the host runs the collection; then attribution must still be right
      a.garbage(20)
      local d2 = measure(mon, function()
        perfmon.event(function()
          collectgarbage()
          collectgarbage()
          a.run(20)
          host_spin(20)
          c.run(20)
        end)
      end)
      assert(d2.process.cpu_us >= 60 * MS, "process: " .. fmt(d2.process.cpu_us))
      assert(cpu(d2, A) >= 20 * MS * (1 - TOL) - SLACK and cpu(d2, A) <= 40 * MS * (1 + TOL) + SLACK,
        "A: " .. fmt(cpu(d2, A)) .. ", expected 20 (+ its finalizer's 20 at most)")
      assert_near(cpu(d2, C), 20 * MS, "C (bystander)")
    end)
  end)

  ---------------------------------------------------------------------------
  describe("outside events", function()

    it("counts work done outside any event", function()
      truth.alone(pending)
      local A, a = plugin("A", [[
        local M = {}
        function M.run(ms) spin(ms) end
        return M]])
      local mon <close> = monitor()
      local d = measure(mon, function()
        a.run(20)
        host_spin(20)
      end)
      assert_near(cpu(d, A), 20 * MS, "A (no event at all)")
      assert(d.process.cpu_us >= 40 * MS * (1 - TOL) - SLACK, "process: " .. fmt(d.process.cpu_us))
      assert.are.equal(0, d.process.ticks, "no event, no process tick")
      assert.are.equal(0, st(d, A).longest, "no event, no duration")
      assert.are.equal(1, st(d, A).ticks)
    end)

    it("charges hundreds of groups run between two snapshots, outside events, what they spent", function()
      -- past 64 groups a period outside events is committed at a window's
      -- end (as a snapshot would): nothing may be lost or counted twice
      local plugins = {}
      for i = 1, 300 do plugins[i] = { timed_plugin("many-" .. i) } end
      local mon <close> = monitor()
      local d = measure(mon, function()
        for _ = 1, 2 do
          for _, p in ipairs(plugins) do p[2].run(200) end
        end
      end)
      local charged, spent = 0, 0
      for _, p in ipairs(plugins) do
        charged, spent = charged + cpu(d, p[1]), spent + p[2].spent
        assert.are.equal(2, st(d, p[1]).ticks)
      end
      assert_near(charged, spent, "the 300 plugins together")
    end)
  end)

  ---------------------------------------------------------------------------
  describe("functions without an _ENV upvalue", function()

    local ENVLESS = [[
      local clock = os.clock
      local M = {}
      M.spin = function(ms) local t = clock() + ms / 1000 while clock() < t do end end
      M.pure = function(n) local x = 0 for i = 1, n do x = x + i % 7 end return x end
      return M]]

    local function has_env_upvalue(f)
      for i = 1, math.huge do
        local name = debug.getupvalue(f, i)
        if name == nil then return false end
        if name == "_ENV" then return true end
      end
    end

    it("attributes them to their chunk's group when its main ran before the monitor", function()
      local A, a = plugin("A", ENVLESS)
      assert.is_false(has_env_upvalue(a.spin))
      assert.is_false(has_env_upvalue(a.pure))
      local mon <close> = monitor()
      local d = measure(mon, function()
        perfmon.event(function()
          a.spin(30)
          host_spin(30)
        end)
      end)
      assert_near(cpu(d, A), 30 * MS, "A (its env-less spin, not the host's 30)")
    end)

    it("attributes functions with no upvalue at all to their chunk's group", function()
      local A, a = plugin("A", ENVLESS)
      local n = 1
      repeat -- size the work to ~30 ms
        n = n * 2
        local c0 = os.clock()
        a.pure(n)
      until os.clock() - c0 > 0.004
      n = n * 8
      local mon <close> = monitor()
      local own
      local d = measure(mon, function()
        perfmon.event(function()
          local c0 = os.clock()
          a.pure(n)
          own = (os.clock() - c0) * 1e6
          host_spin(30)
        end)
      end)
      assert(own >= 10 * MS, "pure work too short: " .. fmt(own))
      assert_near(cpu(d, A), own, "A (its upvalue-less function)")
    end)

    it("attributes them once a sibling with _ENV ran, for a chunk loaded with load and attach", function()
      seq = seq + 1
      local A = perfmon.group{ name = "A", kind = "plugin" }
      local env = setmetatable({}, { __index = _G })
      local src = ENVLESS:gsub("return M%s*$", "M.hello = function() return type(os) end\nreturn M")
      local main = assert(load(src, ("=stopwatch_spec/%d/A"):format(seq), "t", env))
      perfmon.attach(env, A)
      local a = main()             -- before the monitor, not registered
      assert.is_false(has_env_upvalue(a.spin))
      local mon <close> = monitor()
      local d = measure(mon, function()
        perfmon.event(function()
          assert.are.equal("table", a.hello()) -- touches _ENV: the chunk learns env
          a.spin(30)
          host_spin(30)
        end)
      end)
      assert_near(cpu(d, A), 30 * MS, "A (its env-less spin, after a sibling told the chunk's env)")
    end)

    it("charges them to the chunk group with the chunks probe", function()
      local A, a = plugin("A", ENVLESS)
      local mon <close> = monitor{ "jank", "chunks" }
      local d = measure(mon, function()
        perfmon.event(function()
          a.spin(30)
          host_spin(30)
        end)
      end)
      assert_near(cpu(d, A), 30 * MS, "A")
      local chunkname = ("stopwatch_spec/%d/A"):format(seq)
      local found
      for _, s in pairs(d.groups) do
        if s.kind == "chunk" and s.name == chunkname then found = s end
      end
      assert(found, "no chunk group named " .. chunkname)
      assert_near(found.cpu_us, 30 * MS, "chunk group of A")
    end)
  end)
end)

-- stripped_spec.lua: stripped bytecode (string.dump(f, true), luac -s)
-- loaded into an attached environment is charged to that environment's
-- groups.  Stripped code names no upvalue, so no function of it has an
-- upvalue called _ENV; but a load sets upvalue 1 of the function it makes
-- to its environment, and every function the chunk makes reads its
-- globals through the upvalue that came down from there.
--
-- Where Lua's prototype tree can be read (perfmon.info().chunks is
-- "prototype"), every case below is exact.  On the public path
-- (PERFMON_PATH=public) the function a load made tells the functions that
-- share its upvalue 1, and a stripped function nothing places takes the
-- table in its own upvalue 1: exact for all but a function whose main
-- function died before monitoring began and that reads a local of its
-- chunk before any global, which the spec checks is charged no more than
-- its own work there.
--
-- Ground truth: each plugin's busy loop adds what it took (os.clock) to
-- M.spent, or to the global `spent` of its environment.

local perfmon = require("perfmon")
local truth = require("spec.support.truth")
local assert_near = truth.assert_near

local exact = perfmon.info().chunks == "prototype"

-- M.run(ms) spins ms through globals (its only upvalue is _ENV);
-- M.maker() makes such a function at run time; M.quiet(ms) spins and
-- touches no global; M.first(ms) reads the local M before any global (its
-- upvalue 1 is M, its _ENV the second).
local PLUGIN = [[
local M = { spent = 0 }
local clock = os.clock
function M.run(ms)
  local t0 = os.clock()
  local t = t0 + ms / 1000
  while os.clock() < t do end
  M.spent = M.spent + (os.clock() - t0) * 1e6
end
function M.maker()
  return function(ms)
    local t0 = os.clock()
    local t = t0 + ms / 1000
    while os.clock() < t do end
    M.spent = M.spent + (os.clock() - t0) * 1e6
  end
end
function M.quiet(ms)
  local t0 = clock()
  local t = t0 + ms / 1000
  while clock() < t do end
  M.spent = M.spent + (clock() - t0) * 1e6
end
function M.first(ms)
  M.spent = M.spent + 0
  local t0 = os.clock()
  local t = t0 + ms / 1000
  while os.clock() < t do end
  M.spent = M.spent + (os.clock() - t0) * 1e6
end
return M
]]

-- A stripped copy of the text chunk src.
local function stripped(src) return string.dump(assert(load(src)), true) end

local function sandbox() return setmetatable({}, { __index = _G }) end

-- A plugin group attached to a new environment.
local function plugin(name)
  local g = perfmon.group{ name = name, kind = "plugin" }
  local env = sandbox()
  perfmon.attach(env, g)
  return g, env
end

-- The CPU and self µs each group got while fn ran, { cpu, self } each.
local function measure(fn, ...)
  local mon <close> = perfmon.monitor{ "jank" }
  local before = mon:snapshot()
  fn()
  local d = mon:snapshot():subtract(before)
  local out = {}
  for i, g in ipairs{ ... } do out[i] = { d.groups[g.id].cpu_us, d.groups[g.id].self_us } end
  return table.unpack(out)
end

-- Inclusive and self time both near own_us.
local function charged(got, own_us, what)
  assert_near(got[1], own_us, what .. " (cpu)")
  assert_near(got[2], own_us, what .. " (self)")
end

-- Never more than its own work (give or take the tolerance).
local function at_most(got, own_us, what)
  assert(got[1] <= own_us * (1 + truth.TOLERANCE) + truth.SLACK_US,
    ("%s: %.1f ms charged, its own work is %.1f ms"):format(what, got[1] / 1000, own_us / 1000))
end

describe("stripped code in an attached environment", function()
  it("charges a stripped main chunk's own work", function()
    local g, env = plugin("stripped main")
    local main = assert(load(stripped([[
      local t0 = os.clock()
      while os.clock() < t0 + 0.05 do end
      spent = (os.clock() - t0) * 1e6]]), "=?", "b", env))
    local got = measure(main, g)
    charged(got, env.spent, "the stripped main chunk")
  end)

  it("charges the functions of a stripped chunk, and the closures they make", function()
    local g, env = plugin("stripped functions")
    local main = assert(load(stripped(PLUGIN), "=?", "b", env))
    local p
    local got = measure(function()
      p = main()
      for _ = 1, 3 do perfmon.event(function() p.run(8) p.maker()(8) end) end
    end, g)
    charged(got, p.spent, "the stripped chunk's functions")
  end)

  it("charges the functions of a stripped chunk that touch no global", function()
    local g, env = plugin("stripped quiet")
    local main = assert(load(stripped(PLUGIN), "=?", "b", env))
    local p
    local got = measure(function()
      p = main()
      for _ = 1, 3 do perfmon.event(p.quiet, 12) end
    end, g)
    -- on the public path "=?" is every stripped chunk's name, and these
    -- functions share no upvalue with the function the load made
    local check = exact and charged or at_most
    check(got, p.spent, "env-less stripped functions")
  end)

  it("charges a stripped function dumped and loaded alone, and its closures", function()
    local g, env = plugin("stripped function")
    local M = { spent = 0 }
    -- os first: upvalue 1 is _ENV, which the load sets; M is upvalue 2,
    -- set here as a host that loads such functions does
    local bin = string.dump(function(ms)
      local t0 = os.clock()
      local t = t0 + ms / 1000
      while os.clock() < t do end
      M.spent = M.spent + (os.clock() - t0) * 1e6
    end, true)
    local maker_bin = string.dump(function()
      return function(ms)
        local t0 = os.clock()
        local t = t0 + ms / 1000
        while os.clock() < t do end
        M.spent = M.spent + (os.clock() - t0) * 1e6
      end
    end, true)
    local f = assert(load(bin, "=?", "b", env))
    local maker = assert(load(maker_bin, "=?", "b", env))
    debug.setupvalue(f, 2, M)
    debug.setupvalue(maker, 2, M)
    local got = measure(function()
      for _ = 1, 3 do perfmon.event(function() f(8) maker()(8) end) end
    end, g)
    charged(got, M.spent, "the stripped function and its closure")
  end)

  it("tells two stripped plugins apart", function()
    local ga, ea = plugin("stripped a")
    local gb, eb = plugin("stripped b")
    local bin = stripped(PLUGIN)
    local ma = assert(load(bin, "=?", "b", ea))
    local mb = assert(load(bin, "=?", "b", eb))
    local a, b
    local ca, cb = measure(function()
      a, b = ma(), mb()
      for _ = 1, 3 do perfmon.event(function() a.run(8) b.run(4) b.maker()(4) end) end
    end, ga, gb)
    charged(ca, a.spent, "the first stripped plugin")
    charged(cb, b.spent, "the second stripped plugin")
  end)

  describe("run before monitoring began", function()
    it("charges a stripped chunk whose main function lives on", function()
      local g, env = plugin("stripped alive")
      local main = assert(load(stripped(PLUGIN), "=?", "b", env))
      local p = main()
      local got = measure(function()
        for _ = 1, 3 do perfmon.event(function() p.run(6) p.maker()(6) end) end
      end, g)
      assert(main) -- alive until here
      charged(got, p.spent, "the stripped chunk")
    end)

    it("charges a stripped chunk whose main function is gone", function()
      local g, env = plugin("stripped gone")
      local p = assert(load(stripped(PLUGIN), "=?", "b", env))()
      collectgarbage() -- the main function goes, and with it its prototype
      local got = measure(function()
        for _ = 1, 3 do perfmon.event(function() p.run(6) p.maker()(6) end) end
      end, g)
      charged(got, p.spent, "the stripped chunk")
    end)

    it("charges the functions that touch no global of a stripped chunk whose main function is gone", function()
      -- placed by the local M they share with M.run, which reads _ENV
      -- through the upvalue the main function passed down
      local g, env = plugin("stripped gone, quiet")
      local p = assert(load(stripped(PLUGIN), "=?", "b", env))()
      collectgarbage()
      local got = measure(function()
        for _ = 1, 3 do perfmon.event(p.quiet, 12) end
      end, g)
      local check = exact and charged or at_most
      check(got, p.spent, "M.quiet")
    end)

    it("charges a function whose main function is gone and that reads a local first", function()
      local g, env = plugin("stripped gone, local first")
      local p = assert(load(stripped(PLUGIN), "=?", "b", env))()
      collectgarbage()
      local got = measure(function()
        for _ = 1, 3 do perfmon.event(p.first, 12) end
      end, g)
      if exact then charged(got, p.spent, "M.first") else at_most(got, p.spent, "M.first") end
    end)
  end)
end)

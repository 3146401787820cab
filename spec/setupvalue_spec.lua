-- setupvalue_spec.lua: a function whose _ENV upvalue is set to a plugin's
-- environment (debug.setupvalue, debug.upvaluejoin: the setfenv of Lua
-- 5.2 and later) under an open monitor is charged to the plugin from its
-- next call.  perfmon's setupvalue and upvaluejoin replace the debug
-- library's when perfmon is required, behave as its own, and forget the
-- cached groups of the functions they move.
--
-- Ground truth: each function's busy loop adds what it took (os.clock) to
-- M.spent, which the spec clears when the function moves.

local perfmon = require("perfmon")
local truth = require("spec.support.truth")
local assert_near = truth.assert_near

local exact = perfmon.info().chunks == "prototype"

-- Host code, loaded into _G: M.run spins through globals (its _ENV is an
-- upvalue shared with the main function), M.quiet touches no global.
local HOST = [[
local M = { spent = 0 }
local clock = os.clock
function M.run(ms)
  local t0 = os.clock()
  local t = t0 + ms / 1000
  while os.clock() < t do end
  M.spent = M.spent + (os.clock() - t0) * 1e6
end
function M.quiet(ms)
  local t0 = clock()
  local t = t0 + ms / 1000
  while clock() < t do end
  M.spent = M.spent + (clock() - t0) * 1e6
end
return M
]]

local function plugin(name)
  local g = perfmon.group{ name = name, kind = "plugin" }
  local env = setmetatable({}, { __index = _G })
  perfmon.attach(env, g)
  return g, env
end

-- The index of f's upvalue named name.
local function upvalue(f, name)
  for i = 1, math.huge do
    local n = debug.getupvalue(f, i)
    if n == name or n == nil then return n and i end
  end
end

-- Runs move, then fn, under one monitor (whose opening forgets what was
-- resolved before); returns g's cpu and self µs while fn ran.
local function measure(g, move, fn)
  local mon <close> = perfmon.monitor{ "jank" }
  move()
  local before = mon:snapshot()
  fn()
  local d = mon:snapshot():subtract(before).groups[g.id]
  return { d.cpu_us, d.self_us }
end

local function charged(got, own_us, what)
  assert_near(got[1], own_us, what .. " (cpu)")
  assert_near(got[2], own_us, what .. " (self)")
end

local function at_most(got, own_us, what)
  assert(got[1] <= own_us * (1 + truth.TOLERANCE) + truth.SLACK_US,
    ("%s: %.1f ms charged, its own work is %.1f ms"):format(what, got[1] / 1000, own_us / 1000))
end

describe("a reassigned _ENV", function()
  it("is followed at the next call: debug.setupvalue", function()
    local g, env = plugin("setupvalue")
    local main = assert(load(HOST, "=setupvalue_spec host"))
    local M = main()
    local got = measure(g, function()
      M.run(2) -- resolved in _G, and cached
      assert.are.equal("_ENV", debug.setupvalue(M.run, upvalue(M.run, "_ENV"), env))
    end, function()
      M.spent = 0
      for _ = 1, 3 do perfmon.event(M.run, 15) end
    end)
    charged(got, M.spent, "M.run in the plugin's environment")
  end)

  it("is followed by every function sharing the upvalue, and by its chunk", function()
    local g, env = plugin("setupvalue main")
    local main = assert(load(HOST, "=setupvalue_spec host"))
    local M = main()
    local got = measure(g, function()
      M.run(2)
      M.quiet(2)
      debug.setupvalue(main, 1, env) -- the _ENV M.run shares
    end, function()
      M.spent = 0
      for _ = 1, 3 do perfmon.event(function() M.run(8) M.quiet(6) end) end
    end)
    -- on the public path a chunk is told by its name, which now names two
    -- environments: M.quiet, which touches no global, is charged to
    -- neither rather than to the wrong one
    if exact then charged(got, M.spent, "the chunk") else at_most(got, M.spent, "the chunk") end
  end)

  it("is followed at the next call: setfenv by upvaluejoin and setupvalue", function()
    local g, env = plugin("setfenv")
    local M = assert(load(HOST, "=setupvalue_spec host"))()
    local function setfenv(f, t)
      local up = upvalue(f, "_ENV")
      debug.upvaluejoin(f, up, function() return t end, 1)
      debug.setupvalue(f, up, t)
    end
    local got = measure(g, function()
      M.run(2)
      setfenv(M.run, env)
    end, function()
      M.spent = 0
      for _ = 1, 3 do perfmon.event(M.run, 15) end
    end)
    charged(got, M.spent, "M.run after setfenv")
  end)

  it("is followed at the next call: debug.upvaluejoin", function()
    local g, env = plugin("upvaluejoin")
    local M = assert(load(HOST, "=setupvalue_spec host"))()
    local donor = assert(load("return function() return x end", "=donor", "t", env))()
    local got = measure(g, function()
      M.run(2)
      debug.upvaluejoin(M.run, upvalue(M.run, "_ENV"), donor, 1)
    end, function()
      M.spent = 0
      for _ = 1, 3 do perfmon.event(M.run, 15) end
    end)
    charged(got, M.spent, "M.run joined to the plugin's _ENV")
  end)

  it("is followed in stripped code, whose upvalues have no name", function()
    local g, env = plugin("setupvalue stripped")
    local M = { spent = 0 }
    local f = assert(load(string.dump(function(ms)
      local t0 = os.clock()
      local t = t0 + ms / 1000
      while os.clock() < t do end
      M.spent = M.spent + (os.clock() - t0) * 1e6
    end, true), "=?", "b"))
    debug.setupvalue(f, 2, M)
    local got = measure(g, function()
      f(2) -- in _G, which the load set
      assert.are.equal("(no name)", debug.setupvalue(f, 1, env))
    end, function()
      M.spent = 0
      for _ = 1, 3 do perfmon.event(f, 15) end
    end)
    charged(got, M.spent, "the stripped function")
  end)

  it("is followed back out of the plugin", function()
    local g, env = plugin("setupvalue back")
    local M = assert(perfmon.load(HOST, "=setupvalue_spec plugin", env))()
    local G = _G
    local got = measure(g, function()
      M.run(2)
      local up = upvalue(M.run, "_ENV")
      debug.upvaluejoin(M.run, up, function() return G end, 1)
      debug.setupvalue(M.run, up, G)
    end, function()
      M.spent = 0
      for _ = 1, 3 do perfmon.event(M.run, 15) end
    end)
    if exact then
      -- its chunk is still the plugin's, whose groups a function keeps
      -- whatever its _ENV (as under `local _ENV = M`)
      charged(got, M.spent, "M.run, still of the plugin's chunk")
    else
      -- told by its name, its chunk is the plugin's no more than the
      -- host's: in _G, M.run is charged to no plugin
      assert(got[1] <= truth.SLACK_US, ("M.run in _G: %.1f ms charged to the plugin"):format(got[1] / 1000))
    end
  end)
end)

describe("perfmon's debug.setupvalue and debug.upvaluejoin", function()
  it("behave as the debug library's", function()
    local x = 1
    local function f() return x end
    assert.are.equal("x", debug.setupvalue(f, 1, 2))
    assert.are.equal(2, f())
    assert.is_nil(debug.setupvalue(f, 2, 2))
    assert.is_nil(debug.setupvalue(print, 1, 2))
    local function g() return x + 1 end
    local y = 10
    local function h() return y end
    debug.upvaluejoin(g, 1, h, 1)
    assert.are.equal(11, g())
    assert.are.equal(debug.upvalueid(g, 1), debug.upvalueid(h, 1))
  end)

  it("refuse bad arguments as the debug library does", function()
    local function f() return perfmon end
    assert.has_error(function() debug.setupvalue(f, 1) end,
      "bad argument #3 to 'setupvalue' (value expected)")
    assert.has_error(function() debug.setupvalue(1, 1, 1) end,
      "bad argument #1 to 'setupvalue' (function expected, got number)")
    assert.has_error(function() debug.setupvalue(f, "x", 1) end,
      "bad argument #2 to 'setupvalue' (number expected, got string)")
    assert.has_error(function() debug.upvaluejoin(f, 2, f, 1) end,
      "bad argument #2 to 'upvaluejoin' (invalid upvalue index)")
    assert.has_error(function() debug.upvaluejoin(f, 1, f, 9) end,
      "bad argument #4 to 'upvaluejoin' (invalid upvalue index)")
    local c = coroutine.wrap(function() end) -- a C function with an upvalue
    assert.has_error(function() debug.upvaluejoin(c, 1, f, 1) end,
      "bad argument #1 to 'upvaluejoin' (Lua function expected)")
    assert.has_error(function() debug.upvaluejoin(f, 1, c, 1) end,
      "bad argument #3 to 'upvaluejoin' (Lua function expected)")
  end)

  it("add nothing to a debug library that has none", function()
    local core = require("perfmon.loader")
    local lib = { getinfo = debug.getinfo }
    core.upvalue_functions(lib)
    assert.is_nil(lib.setupvalue)
    assert.is_nil(lib.upvaluejoin)
    assert.has_error(function() core.upvalue_functions(1) end,
      "bad argument #1 to 'upvalue_functions' (table expected, got number)")
  end)
end)

-- The hook allocates nothing in steady state: a monitored loop of a million
-- calls into functions perfmon has already seen allocates no memory at all,
-- counted at the state's allocator (spec/support/allocount.c), on whichever
-- path the hook takes (this spec also runs with PERFMON_PATH=public).

local allocount = require("allocount") -- before perfmon: it counts perfmon too
local perfmon = require("perfmon")

local function plugin(name, src)
  local group = perfmon.group{ name = name, kind = "plugin" }
  local env = setmetatable({}, { __index = _G })
  return assert(perfmon.load(src, "=" .. name, env, group))()
end

describe("the hook in steady state", function()
  it("allocates nothing over a million monitored calls", function()
    local a = plugin("alloc_a", [[
      local function leaf(x) return x + 1 end
      return function(n, b) local s = 0 for i = 1, n do s = leaf(s) + b(i) end return s end]])
    local b = plugin("alloc_b", [[return function(i) return i % 3 end]])
    local function work(n) -- n * 2 + 1 calls into a, leaf and b
      return select(2, pcall(a, n, b))
    end
    local mon <close> = perfmon.monitor{ "jank", "ticks", "blocking" }
    perfmon.event(work, 1000) -- warm up: every function seen, stacks grown
    local before = allocount.count()
    local result = work(500000) -- 1,000,001 calls, plus select and pcall
    local allocated = allocount.count() - before
    assert.is_number(result)
    assert.are.equal(0, allocated)
    assert.is_true(mon:snapshot().process.cpu_us > 0) -- it was measuring
  end)

  it("does allocate for new functions, so the count is live", function()
    local _ <close> = perfmon.monitor{ "ticks" }
    local before = allocount.count()
    for i = 1, 200 do
      plugin("alloc_new" .. i, "return function() return 1 end")()
    end
    assert.is_true(allocount.count() - before > 200)
  end)
end)

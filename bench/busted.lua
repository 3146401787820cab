--- bench/busted.lua [ROUNDS]: what perfmon.busted costs a busted run.
--
-- Two suites, generated into a temp dir: 1,000 empty tests (busted's own
-- work per test and the handler's bookkeeping, nothing else), and 300
-- tests of real work over 6 spec files (penlight's pretty-printer, string
-- and table functions, a module under test in lua/, before_each blocks,
-- assertions), 0.5 to 5 ms each.  Each suite runs in four modes, as a child
-- `lua5.4 /usr/bin/busted` with its output thrown away:
--   plain     busted alone
--   monitor   an exact perfmon monitor opened by a helper, no handler: the
--             call/return hook's own cost on busted and the code under test
--   handler   -o perfmon.busted (its report included)
--   sampled   -o perfmon.busted -Xoutput --mode=sampled (the groups by
--             samples every 1000 µs of CPU time)
-- in ROUNDS rounds (8) of the three back to back, order reversed every
-- other round (bench/stats.lua); the ratios are medians over pairs of
-- adjacent rounds, with their interquartile ranges.  Wall time is what a
-- user waits; CPU time (the children's user + system, from
-- /proc/self/stat, 10 ms ticks) shows what the wall time is made of.

local stats = require("bench.stats")
local core = require("perfmon.loader")

local rounds = tonumber(arg[1] or 8)

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function write(path, s)
  local f = assert(io.open(path, "w"))
  f:write(s)
  f:close()
end

local dir = os.tmpname()
os.remove(dir)
assert(os.execute(("mkdir -p %s/empty %s/real/spec %s/real/lua/calc"):format(
  sh_quote(dir), sh_quote(dir), sh_quote(dir))))

-- 1,000 empty tests
local t = { 'describe("empty", function()\n' }
for i = 1, 1000 do t[#t + 1] = ('  it("test %d", function() end)\n'):format(i) end
t[#t + 1] = "end)\n"
write(dir .. "/empty/empty_spec.lua", table.concat(t))

-- the real suite: a module under test and 6 files of 50 tests
write(dir .. "/real/lua/calc/init.lua", [[
local M = {}
function M.primes(n)
  local sieve, out = {}, {}
  for i = 2, n do
    if not sieve[i] then
      out[#out + 1] = i
      for j = i * i, n, i do sieve[j] = true end
    end
  end
  return out
end
function M.words(s)
  local w = {}
  for word in s:gmatch("%a+") do w[#w + 1] = word:lower() end
  table.sort(w)
  return w
end
function M.fib(n) if n < 2 then return n end return M.fib(n - 1) + M.fib(n - 2) end
return M
]])
for f = 1, 6 do
  t = { ([[
local calc = require("calc")
local pretty = require("pl.pretty")
local stringx = require("pl.stringx")
local tablex = require("pl.tablex")
describe("real %d", function()
  local data
  before_each(function() data = { list = calc.primes(2000), text = ("the quick brown fox "):rep(200) } end)
]]):format(f) }
  for i = 1, 50 do
    local k = (f * 50 + i) % 5
    t[#t + 1] = ({
      '  it("primes %d", function() assert.are.equal(1229, #calc.primes(10000 - %d %% 3)) end)\n',
      '  it("pretty %d", function() assert.is_string(pretty.write({ data.list, n = %d })) end)\n',
      '  it("words %d", function() assert.are.equal("brown", calc.words(data.text .. "%d")[1]) end)\n',
      '  it("tablex %d", function() assert.is_true(tablex.deepcompare(tablex.copy(data), data) and %d > 0) end)\n',
      '  it("fib %d", function() assert.are.equal(6765, calc.fib(20))\n'
        .. '    assert.is_true(stringx.startswith("x%d", "x")) end)\n',
    })[k + 1]:format(i, i)
  end
  t[#t + 1] = "end)\n"
  write(("%s/real/spec/real%d_spec.lua"):format(dir, f), table.concat(t))
end
write(dir .. "/monitor.lua", 'MONITOR = require("perfmon").monitor{ "jank" }\n')

local path = os.getenv("LUA_PATH_5_4") or ""
local cpath = os.getenv("LUA_CPATH_5_4") or ""
local MODES = {
  plain = "",
  monitor = "--helper=" .. sh_quote(dir .. "/monitor.lua"),
  handler = "-o perfmon.busted",
  sampled = "-o perfmon.busted -Xoutput --mode=sampled",
}

-- The children's CPU time so far, in seconds (those waited for).
local function children_cpu()
  local f = assert(io.open("/proc/self/stat"))
  local s = f:read("a")
  f:close()
  local fields = {}
  for x in s:match("%) (.*)"):gmatch("%S+") do fields[#fields + 1] = x end
  -- after the name: state is 1, so utime 12, stime 13, cutime 14, cstime 15
  return (tonumber(fields[14]) + tonumber(fields[15])) / 100
end

local function runner(suite, target)
  local cpu = {}
  local function time(mode)
    local cmd = ("cd %s && LUA_PATH_5_4=%s LUA_CPATH_5_4=%s lua5.4 /usr/bin/busted %s %s >/dev/null 2>&1")
      :format(sh_quote(dir .. "/" .. suite), sh_quote("./lua/?.lua;./lua/?/init.lua;" .. path),
        sh_quote(cpath), MODES[mode], target)
    local c0, w0 = children_cpu(), core.wall_us()
    local _, _, code = os.execute(cmd)
    local wall, c = (core.wall_us() - w0) / 1e6, children_cpu() - c0
    -- the suites pass: a failure would time something else
    assert(code == 0, ("%s %s: busted exited %s"):format(suite, mode, tostring(code)))
    cpu[mode] = cpu[mode] or {}
    table.insert(cpu[mode], c)
    return wall
  end
  return time, cpu
end

local order = { "plain", "monitor", "handler", "sampled" }
print(("perfmon.busted: %d rounds of %s side by side (wall s: median; ratios: median of"
  .. " pairs, IQR)"):format(rounds, table.concat(order, ", ")))
print(("%-17s %7s %7s %7s %7s %7s %7s %7s %7s %17s %17s %17s %17s"):format("suite", "plain", "monitor",
  "handler", "sampled", "cpu pl", "cpu mon", "cpu hd", "cpu smp", "monitor/plain", "handler/plain",
  "handler/monitor", "sampled/plain"))
for _, s in ipairs{ { "1000 empty tests", "empty", "." }, { "300 real tests", "real", "spec" } } do
  local time, cpu = runner(s[2], s[3])
  local times = stats.interleave(order, rounds, time)
  local function ratio(a, b)
    local q = stats.paired(times, a, b)
    return ("%5.2f %-11s"):format(q.median, stats.iqr(q))
  end
  print(("%-17s %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %7.2f %17s %17s %17s %17s"):format(s[1],
    stats.median(times.plain), stats.median(times.monitor), stats.median(times.handler),
    stats.median(times.sampled), stats.median(cpu.plain), stats.median(cpu.monitor),
    stats.median(cpu.handler), stats.median(cpu.sampled), ratio("monitor", "plain"),
    ratio("handler", "plain"), ratio("handler", "monitor"), ratio("sampled", "plain")))
end
os.execute("rm -rf " .. sh_quote(dir))

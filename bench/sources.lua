-- bench/sources.lua: source prefixes at scale (bench/sources runs it).
--   first N...   a function's first call under a monitor, which resolves
--                its groups (resolve.c), with N prefixes attached: µs per
--                call, the first call's time less the second's (median of
--                5 rounds of 20,000 new closures of a chunk under one of
--                the prefixes); then the same after detaching down to the
--                first N again, and the ratio of the last N to the first
--   attach N K   the time to attach N prefixes, and to detach them, with
--                no function cached, then with K (default 20,000) of the
--                host's resolved, which the prefixes do not cover
-- The prefixes are folders <tmp>/p<i>/ under a real temporary folder, which
-- perfmon.attach_source normalises (path.c); the chunk's path is
-- <tmp>/p<i>/init.lua.
local perfmon = require("perfmon")

local CLOSURES = 20000
local SRC = "local n = ... local fs = {} for i = 1, n do fs[i] = function() end end return fs"

local root = os.tmpname()
os.remove(root)
assert(os.execute(("mkdir '%s'"):format(root)))

local groups = {}
for i = 1, 64 do groups[i] = perfmon.group{ name = "g" .. i, kind = "plugin" } end

local function prefix(i) return ("%s/p%d/"):format(root, i) end

local attached = 0
local function attach_to(n)
  for i = attached + 1, n do perfmon.attach_source(prefix(i), groups[i % 64 + 1]) end
  for i = attached, n + 1, -1 do perfmon.detach_source(prefix(i), groups[i % 64 + 1]) end
  attached = n
end

local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end

-- µs per first call, with the prefixes attached now, of a chunk under
-- prefix `under`
local function first_call_us(under)
  local main = assert(load(SRC, ("@%s/p%d/init.lua"):format(root, under)))
  local mon <close> = perfmon.monitor{ "jank" } -- luacheck: ignore 211
  local per = {}
  for r = 1, 5 do
    local fs = main(CLOSURES)
    local t0 = os.clock()
    for i = 1, CLOSURES do fs[i]() end
    local t1 = os.clock()
    for i = 1, CLOSURES do fs[i]() end
    local t2 = os.clock()
    per[r] = ((t1 - t0) - (t2 - t1)) / CLOSURES * 1e6
    fs = nil -- luacheck: ignore
    collectgarbage()
  end
  return median(per)
end

local bench = {}

function bench.first(...)
  local ns = {}
  for i, a in ipairs{ ... } do
    ns[i] = assert(math.tointeger(tonumber(a)), "first: N must be an integer")
  end
  print("prefixes   µs per first call")
  local all = {}
  for _, n in ipairs(ns) do all[#all + 1] = n end
  for i = #ns - 1, 1, -1 do all[#all + 1] = ns[i] end
  local first, last = {}, {}
  for k, n in ipairs(all) do
    attach_to(n)
    local us = first_call_us(math.max(1, n // 2))
    if k <= #ns then first[n] = first[n] or us end
    last[n] = us
    print(("%8d %15.2f%s"):format(n, us, k > #ns and "   (again, detached down)" or ""))
  end
  local lo, hi = ns[2] or ns[1], ns[#ns]
  print(("%d / %d prefixes: %.2fx"):format(hi, lo, last[hi] / (last[lo] or first[lo])))
  attach_to(0)
end

-- Attaches and detaches n prefixes while k functions of the host (a chunk
-- outside them) are resolved and cached under a monitor.
local function attach_detach(n, k)
  local mon <close> = perfmon.monitor{ "jank" } -- luacheck: ignore 211
  local fs = assert(load(SRC, ("@%s/host.lua"):format(root)))(k)
  for i = 1, k do fs[i]() end
  attach_to(0)
  collectgarbage()
  local t0 = os.clock()
  attach_to(n)
  local t1 = os.clock()
  attach_to(0)
  local t2 = os.clock()
  print(("attach %d prefixes, %d functions cached: %.1f ms (%.2f µs each); detach them: %.1f ms"):format(
    n, k, (t1 - t0) * 1000, (t1 - t0) * 1e6 / n, (t2 - t1) * 1000))
end

function bench.attach(n, k)
  n = assert(math.tointeger(tonumber(n)), "attach: N must be an integer")
  attach_detach(n, 0)
  attach_detach(n, assert(math.tointeger(tonumber(k or 20000)), "attach: K must be an integer"))
end

local what = arg[1]
local ok, err = pcall(function()
  assert(bench[what], "usage: sources.lua first N... | attach N [K]")
  bench[what](table.unpack(arg, 2))
end)
os.execute(("rm -rf '%s'"):format(root))
if not ok then error(err, 0) end

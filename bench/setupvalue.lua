-- bench/setupvalue.lua N: what following a reassigned _ENV costs
-- (src/lupvalues.h).  N Lua functions (N/100 chunks of 100) run under an
-- exact monitor, so their groups are cached; then one debug.setupvalue of
-- an _ENV forgets every cached resolution, and each function is resolved
-- again at its next call.  Prints, in CPU time: that setupvalue, the next
-- call of all N beyond a cached call of all N (per function and in all),
-- and a setupvalue of an upvalue of another name, perfmon's beside the
-- debug library's (best of 5 rounds of 200,000 each, interleaved).
-- Medians of 7 rounds for the rest.
local library_setupvalue = debug.setupvalue -- before perfmon replaces it
local perfmon = require("perfmon")

local n = assert(tonumber(arg[1]), "usage: setupvalue.lua N")
local fs = {}
local CHUNK = "local t = {} for i = 1, 100 do t[i] = function() return y end end return t"
for c = 1, n // 100 do
  for _, f in ipairs(assert(load(CHUNK, "=chunk " .. c))()) do fs[#fs + 1] = f end
end
local target = fs[1]
local env = setmetatable({}, { __index = _G })
perfmon.attach(env, perfmon.group{ name = "plugin", kind = "plugin" })

local function all()
  local t0 = os.clock()
  for i = 1, #fs do fs[i]() end
  return os.clock() - t0
end

local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end

-- 7 rounds, the _ENV moved to the plugin's environment and back in turn:
-- the medians of the setupvalue and of the next call of all beyond a
-- cached one
local mon = perfmon.monitor{ "jank" }
all() -- resolved and cached
local sets, agains, t0 = {}, {}
for r = 1, 7 do
  local cached = all()
  t0 = os.clock()
  debug.setupvalue(target, 1, r % 2 == 1 and env or _G) -- upvalue 1 is _ENV
  sets[r] = os.clock() - t0
  agains[r] = all() - cached
end
local set_env, again = median(sets), median(agains)

local x = 0
local function holder() return x end
local best_perfmon, best_library = math.huge, math.huge
for _ = 1, 5 do
  t0 = os.clock()
  for i = 1, 200000 do debug.setupvalue(holder, 1, i) end
  best_perfmon = math.min(best_perfmon, os.clock() - t0)
  t0 = os.clock()
  for i = 1, 200000 do library_setupvalue(holder, 1, i) end
  best_library = math.min(best_library, os.clock() - t0)
end
mon:close()

print(("%-8s %8d %16.1f %18.2f %14.1f %12.0f %12.0f"):format(perfmon.info().path, #fs,
  set_env * 1e6, again / #fs * 1e6, again * 1e3,
  best_perfmon / 200000 * 1e9, best_library / 200000 * 1e9))

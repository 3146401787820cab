-- bench/memory_probe.lua [ROUNDS]: see bench/memory_probe.
package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path

local perfmon = require("perfmon")
local stats = require("stats")

local rounds = tonumber(arg[1] or "") or 12
local MODES = { "time", "memory" }
local PROBES = { time = { "jank", "ticks" }, memory = { "jank", "ticks", "memory" } }

print(("memory_probe: %d interleaved rounds of a quarter-size run per mode; os.clock CPU time")
  :format(rounds))
print(("%-11s %10s %10s %9s %11s"):format("workload", "time ms", "memory ms", "mem/time", "IQR"))
for _, name in ipairs{ "fib", "editor", "coroutines", "tables", "groups1000" } do
  local w = require("workloads." .. name)
  local inst = w.setup(math.max(1, math.floor(w.units / 4)))
  local function run(mode)
    collectgarbage("collect")
    local _ <close> = perfmon.monitor(PROBES[mode])
    local t0 = os.clock()
    inst.run(perfmon.event)
    return os.clock() - t0
  end
  run("time") -- warm-up
  local times = stats.interleave(MODES, rounds, run)
  local q = stats.paired(times, "memory", "time")
  print(("%-11s %10.1f %10.1f %9.3f %11s"):format(name, stats.median(times.time) * 1000,
    stats.median(times.memory) * 1000, q.median, stats.iqr(q)))
end

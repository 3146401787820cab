--- bench/workloads/groups1000.lua: a thousand groups, each running briefly
-- (see bench/run.lua for what a workload is).

local perfmon = require("perfmon")
local plugin = require("plugin")

local GROUP_SRC = [[
  local k = %d
  function handle(x)
    local s = 0
    for i = 1, 8 do s = s + (x * i + k) %% 7 end
    return s
  end ]]

return {
  name = "groups1000",
  what = "1000 chunks, each its own group, each called 3 times per round (event), 360 rounds",
  units = 360,
  setup = function(rounds)
    local n = 1000
    collectgarbage("collect")
    local kb0 = collectgarbage("count")
    local groups = {}
    for i = 1, n do
      groups[i] = perfmon.group{ name = "g" .. i, kind = "plugin" }
    end
    collectgarbage("collect")
    local kb1 = collectgarbage("count")
    local handlers = {}
    for i = 1, n do
      local env = plugin.sandbox()
      assert(perfmon.load(GROUP_SRC:format(i), "=bench/g" .. i, env, groups[i]))()
      handlers[i] = env.handle
    end
    collectgarbage("collect")
    local kb2 = collectgarbage("count")
    local function round(x)
      local sum = 0
      for pass = 1, 3 do
        for i = 1, n do sum = sum + handlers[i](x + pass) end
      end
      return sum
    end
    -- What running under a monitor adds: one round, then the figures
    -- while the monitor is still open (closing it frees perfmon's caches).
    local info0 = perfmon.info()
    local mon = perfmon.monitor{ "jank", "ticks" }
    perfmon.event(round, 1)
    collectgarbage("collect")
    local kb3 = collectgarbage("count")
    local info1 = perfmon.info()
    mon:close()
    return {
      groups = groups,
      -- bench/run.lua prints these in its memory section
      memory = {
        groups_kb = kb1 - kb0, chunks_kb = kb2 - kb1, monitor_kb = kb3 - kb2,
        bytes_before = info0.bytes, bytes_monitored = info1.bytes,
        bytes_after = perfmon.info().bytes, ngroups = info1.groups,
      },
      run = function(drive)
        local sum = 0
        for r = 1, rounds do sum = sum + drive(round, r) end
        return sum
      end,
    }
  end,
}

--- bench/workloads/coroutines.lua: coroutine-heavy, producer -> filter ->
-- consumer in three plugins (see bench/run.lua for what a workload is).

local plugin = require("plugin")

return {
  name = "coroutines",
  what = "producer coroutine -> filter (coroutine.wrap) -> consumer, 1.2M items, 1000 an event",
  units = 1200000,
  setup = function(items)
    local penv, pgroup = plugin.load("producer", [[
      function make(n)
        return coroutine.create(function()
          for i = 1, n do coroutine.yield(i * 7 % 1009) end
          return nil
        end)
      end ]])
    local fenv, fgroup = plugin.load("filter", [[
      function make(source)
        return coroutine.wrap(function()
          while true do
            local ok, v = coroutine.resume(source)
            assert(ok, v)
            if v == nil then return nil end
            if v % 3 ~= 0 then coroutine.yield(v * 2) end
          end
        end)
      end ]])
    local cenv, cgroup = plugin.load("consumer", [[
      function take(pull, batch)
        local sum, n = 0, 0
        for _ = 1, batch do
          local v = pull()
          if v == nil then return sum, true end
          sum = sum + v
          n = n + 1
        end
        return sum, false
      end ]])
    local batch = 1000
    return {
      groups = { pgroup, fgroup, cgroup },
      run = function(drive)
        local pull = fenv.make(penv.make(items))
        local sum, done, s = 0, false, 0
        while not done do
          s, done = drive(cenv.take, pull, batch)
          sum = sum + s
        end
        return sum
      end,
    }
  end,
}

--- bench/workloads/fib.lua: call-heavy recursion in one plugin (see
-- bench/run.lua for what a workload is).

local plugin = require("plugin")

return {
  name = "fib",
  what = "fib(27) x20 in a plugin, one event each (call-heavy recursion)",
  units = 20,
  setup = function(times)
    local env, group = plugin.load("fib", [[
      local function fib(n)
        if n < 2 then return n end
        return fib(n - 1) + fib(n - 2)
      end
      function run(n) return fib(n) end
    ]])
    local function fibcalls(n) -- calls fib(n) makes: 2 fib(n+1) - 1
      local a, b = 0, 1
      for _ = 1, n + 1 do a, b = b, a + b end
      return 2 * a - 1
    end
    return {
      groups = { group },
      calls = times * (fibcalls(27) + 1),
      run = function(drive)
        local sum = 0
        for _ = 1, times do sum = sum + drive(env.run, 27) end
        return sum
      end,
    }
  end,
}

--- bench/workloads/tables.lua: table-heavy loops with few calls, in one
-- plugin (see bench/run.lua for what a workload is).

local plugin = require("plugin")

return {
  name = "tables",
  what = "matrix multiply 90x90 + sieve to 300000 in a plugin, 6 events",
  units = 6,
  setup = function(events)
    local env, group = plugin.load("numeric", [[
      local function matrix(n, seed)
        local m = {}
        for i = 1, n do
          local row = {}
          for j = 1, n do row[j] = (i * seed + j) % 10 end
          m[i] = row
        end
        return m
      end
      local function matmul(a, b, n)
        local c = {}
        for i = 1, n do
          local ci, ai = {}, a[i]
          for j = 1, n do
            local s = 0
            for k = 1, n do s = s + ai[k] * b[k][j] end
            ci[j] = s
          end
          c[i] = ci
        end
        return c
      end
      local function sieve(n)
        local composite, count = {}, 0
        for i = 2, n do
          if not composite[i] then
            count = count + 1
            for j = i * i, n, i do composite[j] = true end
          end
        end
        return count
      end
      function run(n, limit)
        local c = matmul(matrix(n, 3), matrix(n, 7), n)
        return c[n][n] + c[1][1] + sieve(limit)
      end ]])
    return {
      groups = { group },
      run = function(drive)
        local sum = 0
        for _ = 1, events do sum = sum + drive(env.run, 90, 300000) end
        return sum
      end,
    }
  end,
}

--- bench/plugin.lua: the benchmarks' plugins, each in its own sandbox and
-- group, loaded by perfmon.load as a host would; with plugin.bare set
-- (bench/run.lua --mode bare), by plain load() in no group, perfmon never
-- required.

local plugin = {}

--- A sandbox with the standard functions the plugins use, and extra's.
function plugin.sandbox(extra)
  local env = {
    string = string, table = table, math = math, coroutine = coroutine,
    ipairs = ipairs, pairs = pairs, select = select, type = type,
    tostring = tostring, tonumber = tonumber, error = error, assert = assert,
  }
  for k, v in pairs(extra or {}) do env[k] = v end
  return env
end

--- Loads src as the plugin `name` (chunk "=bench/<name>", its own sandbox
-- and group of kind `kind`), runs its main chunk, returns env, group and
-- what the chunk returned.
function plugin.load(name, src, extra, kind)
  if plugin.bare then
    local env = plugin.sandbox(extra)
    return env, nil, assert(load(src, "=bench/" .. name, "t", env))()
  end
  local perfmon = require("perfmon")
  local group = perfmon.group{ name = name, kind = kind or "plugin" }
  local env = plugin.sandbox(extra)
  local main = assert(perfmon.load(src, "=bench/" .. name, env, group))
  return env, group, main()
end

return plugin

-- bench/monitor_open.lua N: loads N chunks (each a function with an _ENV
-- upvalue, kept alive; their main functions dropped), then times opening
-- the first monitor and, after it closed, the next one (CPU ms).
local perfmon = require("perfmon")

local n = assert(tonumber(arg[1]), "usage: monitor_open.lua N")
local keep = {}
for i = 1, n do
  keep[i] = assert(load("local x = " .. i .. " return function() return x + (y or 0) end",
    "=chunk " .. i))()
end
collectgarbage()

local function open_ms()
  local t0 = os.clock()
  local mon = perfmon.monitor{ "jank" }
  local ms = (os.clock() - t0) * 1000
  mon:close()
  return ms
end

local first = open_ms()
local later = open_ms()
print(("%-10s %7d %10.1f %14.1f %15.1f"):format(perfmon.info().path, n,
  collectgarbage("count") / 1024, first, later))

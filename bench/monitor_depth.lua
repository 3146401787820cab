-- bench/monitor_depth.lua: what perfmon's first look at a deep stack costs
-- (run by bench/monitor_depth, once per hook path).
--
-- A thread perfmon first sees with frames on its stack gets them all
-- pushed on its shadow stack (seeded) before the event is handled: the
-- frames that opened a monitor, at its first hook event, and a coroutine
-- suspended before monitoring began, at its first resume.  Prints the CPU
-- time (os.clock) of each at several depths, for the path this process
-- runs on (perfmon.info().path): "fast" walks the frames down their
-- callers, "public" calls lua_getstack per level, O(level) each, so it
-- stops at MAX_PUBLIC frames.

local perfmon = require("perfmon")

local DEPTHS = { 1000, 10000, 20000, 100000, 190000 }
local MAX_PUBLIC = 20000
local path = perfmon.info().path

-- Calls fn at the bottom of a recursion `depth` frames deep.
local function at_depth(depth, fn)
  local function rec(n)
    if n == 0 then return fn() end
    local r = rec(n - 1)
    return r
  end
  return rec(depth)
end

-- The CPU time of opening a monitor at the bottom and its first event.
local function open_deep(depth)
  return at_depth(depth, function()
    local t0 = os.clock()
    local _ <close> = perfmon.monitor{ "ticks" }
    local function first_event() end
    first_event()
    return os.clock() - t0
  end)
end

-- The CPU time of the first resume, under a monitor, of a coroutine
-- suspended `depth` frames deep before the monitor opened.
local function resume_deep(depth)
  local co = coroutine.create(function()
    return at_depth(depth, function() coroutine.yield() return 0 end)
  end)
  assert(coroutine.resume(co))
  local _ <close> = perfmon.monitor{ "ticks" }
  local t0 = os.clock()
  assert(coroutine.resume(co))
  return os.clock() - t0
end

for _, depth in ipairs(DEPTHS) do
  if path == "public" and depth > MAX_PUBLIC then
    print(("%-7s %7d frames  %10s  %10s"):format(path, depth, "-", "-"))
  else
    print(("%-7s %7d frames  %8.4f s  %8.4f s"):format(path, depth, open_deep(depth), resume_deep(depth)))
  end
end

-- perfmon demo: four sandboxed plugins, an event loop, and the table that
-- tells which plugin makes the host slow.  Run with `tools/run demo`.

local perfmon = require("perfmon")

-- The plugins a host would load from disk; each gets its own sandbox.
local PLUGINS = {
  { name = "wordcount", src = [[
      local count = 0
      function on_event(text)
        for _ in text:gmatch("%S+") do count = count + 1 end
      end ]] },
  { name = "spellcheck", src = [[  -- slow: checks every word, every time
      local dictionary = {}
      for i = 1, 2000 do dictionary["w" .. i] = true end
      function on_event(text)
        local misses = 0
        for _ = 1, 60 do
          for word in text:gmatch("%a+") do
            if not dictionary[word:lower()] then misses = misses + 1 end
          end
        end
        return misses
      end ]] },
  { name = "autosave", src = [[  -- blocks on disk now and then
      local n = 0
      function on_event(text)
        n = n + 1
        if n % 25 == 0 then
          blocking(function() os.execute("sleep 0.02") end)
        end
      end ]] },
  { name = "linter", src = [[  -- a coroutine that works a little each event
      local job = coroutine.wrap(function(text)
        while true do
          local warnings = 0
          for line in text:gmatch("[^\n]+") do
            if #line > 40 then warnings = warnings + 1 end
          end
          text = coroutine.yield(warnings)
        end
      end)
      function on_event(text) return job(text) end ]] },
}

local function sandbox()
  return { string = string, table = table, math = math, os = { execute = os.execute },
           coroutine = coroutine, pairs = pairs, ipairs = ipairs,
           blocking = perfmon.blocking }
end

local plugins = {}
for _, p in ipairs(PLUGINS) do
  local group = perfmon.group{ name = p.name, kind = "plugin" }
  local env = sandbox()
  assert(perfmon.load(p.src, "=" .. p.name, env, group))()
  plugins[#plugins + 1] = { group = group, on_event = env.on_event }
end

local text = ("the quick brown fox jumps over the lazy dog\n"):rep(40)

local mon <close> = perfmon.monitor{ "jank", "ticks", "blocking" }
local before = mon:snapshot()
for _ = 1, 100 do
  perfmon.event(function()
    for _, p in ipairs(plugins) do p.on_event(text) end
  end)
end
local d = mon:snapshot():subtract(before)

-- The table, busiest plugin first.
local rows = {}
for _, p in ipairs(plugins) do rows[#rows + 1] = d.groups[p.group.id] end
table.sort(rows, function(a, b) return a.cpu_us > b.cpu_us end)

print(("%d events in %.0f ms of wall time, %.1f ms of CPU (%s clock)")
  :format(d.process.ticks, d.time / 1000, d.process.cpu_us / 1000, perfmon.info().clock))
print()
print(("%-12s %10s %7s %6s %12s  %-22s %s")
  :format("plugin", "cpu ms", "share", "ticks", "blocking ms", "durations (>=1,2,4..ms)", "longest"))
for _, s in ipairs(rows) do
  print(("%-12s %10.1f %6.1f%% %6d %12.1f  %-22s %d"):format(
    s.name, s.cpu_us / 1000, 100 * s.cpu_us / math.max(d.process.cpu_us, 1), s.ticks,
    s.blocking_us / 1000, table.concat(s.durations, " ", 1, 6), s.longest))
end

--- embed-check: what examples/embed.c must print (tests/install-test,
-- tests/embedding-doc-test).
--
--   lua5.4 tests/embed-check.lua PROGRAM
--   lua5.4 tests/embed-check.lua --output FILE NAME
--
-- runs the program, echoes its output (or reads the output of a run that
-- succeeded from FILE, NAME saying which), and exits 0 only when it
-- succeeded and perfmon's answer agrees with the program's own clock: the plugin
-- whose calls took the most thread CPU time (the truth, measured by the
-- host around each call) is the one perfmon charged most and named
-- slowest, each plugin was entered once per event, and perfmon's figure
-- for the slow plugin is within TOLERANCE of the truth.

local TOLERANCE = 0.5 -- perfmon splits an event by cycles, which preemption skews

local usage = "usage: lua5.4 tests/embed-check.lua PROGRAM | --output FILE NAME"
local program, output, ok, how, code
if arg[1] == "--output" then
  local file
  file, program = assert(arg[2], usage), assert(arg[3], usage)
  local f = assert(io.open(file))
  output, ok = f:read("a"), true
  f:close()
else
  program = assert(arg[1], usage)
  local p = assert(io.popen("'" .. program:gsub("'", "'\\''") .. "' 2>&1"))
  output = p:read("a")
  ok, how, code = p:close()
  io.write(output)
end

local problems = {}
local function problem(fmt, ...) problems[#problems + 1] = fmt:format(...) end

if not ok then problem("the program failed (%s %s)", how, code) end
local events = tonumber(output:match("^perfmon%-embed: plugins %S+ and %S+, (%d+) events\n"))
local rows = {}
for line in output:gmatch("[^\n]+") do
  local name, cpu, ticks, measured = line:match("^(%S+) +([%d.]+) +(%d+) +([%d.]+)$")
  if name then
    rows[#rows + 1] = { name = name, cpu_ms = tonumber(cpu), ticks = tonumber(ticks),
      measured_ms = tonumber(measured) }
  end
end
local named = output:match("\nperfmon%-embed: (%S+) was the slowest: ")

if not events then problem("no 'plugins A and B, N events' line") end
if #rows ~= 2 then problem("%d plugin rows, not 2", #rows) end
if not named then problem("no 'X was the slowest' line") end
if events and #rows == 2 and named then
  table.sort(rows, function(a, b) return a.measured_ms > b.measured_ms end)
  local slow, fast = rows[1], rows[2]
  for _, r in ipairs(rows) do
    if r.ticks ~= events then
      problem("%s was entered %d times, not once per event (%d)", r.name, r.ticks, events)
    end
  end
  if not (slow.cpu_ms > fast.cpu_ms) then
    problem("perfmon charged %s (%.1f ms measured) %.1f ms, no more than %s (%.1f ms measured): %.1f ms",
      slow.name, slow.measured_ms, slow.cpu_ms, fast.name, fast.measured_ms, fast.cpu_ms)
  end
  if named ~= slow.name then
    problem("the slowest plugin is %s by the host's clock, but the program names %s",
      slow.name, named)
  end
  if math.abs(slow.cpu_ms - slow.measured_ms) > TOLERANCE * slow.measured_ms then
    problem("perfmon charged %s %.1f ms, but its calls took %.1f ms of CPU",
      slow.name, slow.cpu_ms, slow.measured_ms)
  end
end

if #problems > 0 then
  io.stderr:write("embed-check: FAIL: " .. program .. "\n  " .. table.concat(problems, "\n  ") .. "\n")
  os.exit(1)
end
print("embed-check: ok: " .. program)

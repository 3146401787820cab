--- bench/bare.lua: the workloads of bench/run.lua with perfmon never
-- loaded, so that bench/instructions can tell what perfmon costs a process
-- that loads it and opens no monitor (its allocator wrapper) from what a
-- monitor costs.  The plugins are loaded by plain load() into the same
-- sandboxes, in no group; groups1000, which makes perfmon groups, has no
-- bare run.
--
--   lua5.4 bench/bare.lua [--quick] [--reps N] --only NAME[,NAME...]
--
-- does what `bench/run.lua --mode none` does with the same arguments: N
-- full-size runs of each workload (1/4 size with --quick), each after a
-- full collection, and prints each run's time.

local USAGE = "usage: lua5.4 bench/bare.lua [--quick] [--reps N] --only NAME[,NAME...]"

local opts = { quick = false, reps = nil, only = nil }
do
  local i = 1
  while i <= #arg do
    local a = arg[i]
    if a == "--quick" then
      opts.quick = true
    elseif a == "--reps" and tonumber(arg[i + 1]) and tonumber(arg[i + 1]) >= 1
        and tonumber(arg[i + 1]) % 1 == 0 then
      opts.reps = tonumber(arg[i + 1])
      i = i + 1
    elseif a == "--only" and arg[i + 1] then
      opts.only = {}
      for name in arg[i + 1]:gmatch("[^,]+") do opts.only[#opts.only + 1] = name end
      i = i + 1
    else
      io.stderr:write("bench/bare: bad argument: ", a, "\n", USAGE, "\n")
      os.exit(2)
    end
    i = i + 1
  end
  if not opts.only then
    io.stderr:write("bench/bare: --only is required\n", USAGE, "\n")
    os.exit(2)
  end
  opts.reps = opts.reps or (opts.quick and 3 or 7)
end
local SCALE = opts.quick and 0.25 or 1

package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path

local plugin = require("plugin")
function plugin.load(name, src, extra)
  local env = plugin.sandbox(extra)
  local main = assert(load(src, "=bench/" .. name, "t", env))
  return env, nil, main()
end

local function direct(fn, ...) return fn(...) end

for _, name in ipairs(opts.only) do
  if name == "groups1000" then
    io.stderr:write("bench/bare: groups1000 makes perfmon groups: it has no bare run\n")
    os.exit(2)
  end
  local ok, w = pcall(require, "workloads." .. name)
  if not ok then
    io.stderr:write("bench/bare: unknown workload: ", name, "\n", USAGE, "\n")
    os.exit(2)
  end
  local inst = w.setup(math.max(1, math.floor(w.units * SCALE + 0.5)))
  for rep = 1, opts.reps do
    collectgarbage("collect")
    local t0 = os.clock()
    inst.run(direct)
    print(("%s bare run %d: %.1f ms"):format(name, rep, (os.clock() - t0) * 1000))
  end
end
assert(package.loaded.perfmon == nil, "bench/bare: perfmon was loaded")

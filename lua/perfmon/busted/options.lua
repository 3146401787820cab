--- perfmon.busted.options: the handler's -Xoutput options, read and
-- checked (the list is in busted.lua's header).

local M = {}

local USAGE = "--wrap=HANDLER, --top=N, --json=PATH, --budget-ms=MS, --modules=A:B,"
  .. " --mode=exact|sampled, --rate-us=US"
local core = require("perfmon.loader")
local module = require("perfmon.module")

local function bad(option, msg)
  error(("perfmon.busted: bad option '%s' (%s)"):format(option, msg), 3)
end

--- Reads the -Xoutput options (a list of strings); returns the options
-- and the list of those for the wrapped handler (those that do not begin
-- with "--": junit's file name).
function M.parse(list)
  local opts, rest = { top = 10 }, {}
  for _, a in ipairs(list or {}) do
    local key, value = a:match("^%-%-([%w-]+)=(.*)$")
    if not key and a:sub(1, 2) == "--" then
      bad(a, "expected --name=value; options: " .. USAGE)
    elseif not key then
      rest[#rest + 1] = a
    elseif key == "wrap" then
      if value == "" then bad(a, "a handler name expected") end
      opts.wrap = value
    elseif key == "top" then
      local n = math.tointeger(tonumber(value))
      if not n or n < 0 then bad(a, "a whole number >= 0 expected") end
      opts.top = n
    elseif key == "json" then
      if value == "" then bad(a, "a file path expected") end
      opts.json = value
    elseif key == "budget-ms" then
      local n = tonumber(value)
      if not n or n <= 0 or n ~= n or n == math.huge then
        bad(a, "a positive number of ms expected")
      end
      opts.budget_us = n * 1000
    elseif key == "mode" then
      if value ~= "exact" and value ~= "sampled" then bad(a, '"exact" or "sampled" expected') end
      opts.mode = value
    elseif key == "rate-us" then
      local n = math.tointeger(tonumber(value))
      if not n or n < core.rate_min_us or n > core.rate_max_us then
        bad(a, ("a whole number of µs in [%d, %d] expected"):format(core.rate_min_us, core.rate_max_us))
      end
      opts.rate_us = n
    elseif key == "modules" then
      local mods = {}
      for p in value:gmatch("[^:]+") do mods[#mods + 1] = p end
      if #mods == 0 then bad(a, "a list of path prefixes separated by ':' expected") end
      opts.modules = mods
    else
      bad(a, "unknown option; options: " .. USAGE)
    end
  end
  if opts.rate_us and opts.mode ~= "sampled" then
    bad("--rate-us=" .. opts.rate_us, "for --mode=sampled")
  end
  return opts, rest
end

return module(M)

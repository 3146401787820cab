--- perfmon.loader: perfmon's C core (perfmon.core), for the other modules,
-- in any host.
--
-- require("perfmon.core") comes first.  Some hosts replace Lua's searchers
-- for C modules: Lite XL's looks for luaopen_lite_xl_core or luaopen_core
-- in a core.so, never for luaopen_perfmon_core.  When require fails, the
-- core is opened with package.loadlib and its own entry point from: the
-- core.so next to this file, perfmon/core.so on package.cpath, and the
-- directory where `cmake --install` puts the C module.  When every way
-- fails, the error lists what was tried.  Returns the core's table's face
-- (perfmon.module), which then is package.loaded["perfmon.core"] too.

local MODULE, SYMBOL, FILE = "perfmon.core", "luaopen_perfmon_core", "core.so"

-- `cmake --install` writes here the directory of the installed C module
-- (relative to the directory of this file's installed copy, or absolute).
-- Elsewhere (the source tree, a rock) it stays this placeholder.
local INSTALL_CDIR = "@PERFMON_LOADER_CDIR@"

-- The core's table, as its face (perfmon.module), in package.loaded.
local function loaded(core)
  local face = require("perfmon.module")(core)
  package.loaded[MODULE] = face
  return face
end

local ok, core = pcall(require, MODULE)
if ok then return loaded(core) end
local tried = {} -- each attempt and why it failed, for the error
local function failed(fmt, ...)
  tried[#tried + 1] = (fmt:format(...):gsub("\n\t?", "\n\t\t"))
end
failed("require(%q): %s", MODULE, tostring(core))

-- require passes the file it found; a chunk loaded some other way finds
-- its source through debug.
local here = select(2, ...)
if type(here) ~= "string" and debug and debug.getinfo then
  local source = debug.getinfo(1, "S").source
  here = source:sub(1, 1) == "@" and source:sub(2) or nil
end
local dir = type(here) == "string" and here:match("^(.*)[/\\]") or nil

local candidates, seen = {}, {}
local function candidate(path, how)
  if path and not seen[path] then
    seen[path] = true
    candidates[#candidates + 1] = { path = path, how = how }
  end
end
if dir then
  candidate(dir .. "/" .. FILE, "next to " .. here)
end
if type(package.cpath) == "string" and package.searchpath then
  local path, err = package.searchpath(MODULE, package.cpath)
  if path then
    candidate(path, "on package.cpath")
  else
    failed("package.cpath: %s", err)
  end
end
if INSTALL_CDIR:sub(1, 1) ~= "@" then
  local cdir = INSTALL_CDIR
  if cdir:sub(1, 1) ~= "/" and dir then cdir = dir .. "/" .. cdir end
  candidate(cdir .. "/" .. FILE, "where cmake --install put it")
end

if not package.loadlib then
  failed("package.loadlib: not available in this host")
  candidates = {}
end
for _, c in ipairs(candidates) do
  local f = io.open(c.path, "rb")
  if not f then
    failed("%s (%s): no such file", c.path, c.how)
  else
    f:close()
    local open, err = package.loadlib(c.path, SYMBOL)
    if not open then
      failed("package.loadlib(%q, %q): %s", c.path, SYMBOL, err)
    else
      local opened, result = pcall(open, MODULE, c.path)
      if opened and type(result) == "table" then return loaded(result) end
      failed("%s(%q): %s", SYMBOL, c.path,
        opened and "returned a " .. type(result) .. ", not a table" or tostring(result))
    end
  end
end

error(("perfmon: cannot load its C core, %s; tried:\n\t%s"):format(
  MODULE, table.concat(tried, "\n\t")), 0)

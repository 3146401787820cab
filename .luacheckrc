-- luacheck's configuration (Debian's lua-check): the ctest luacheck runs
-- `luacheck lua spec integrations bench` from the repository root.
std = "lua54"
-- The tree sets no line length for Lua.
max_line_length = false
exclude_files = { "build/**", "build-*/**", "lua_modules/**", ".luarocks/**" }
-- (busted's globals in **/spec/**/*_spec.lua and **/test/**/*_spec.lua
-- are luacheck's own default.)

-- A Lite XL plugin runs with the editor's globals (data/core/start.lua).
files["integrations/lite-xl/perfmon"] = {
  read_globals = { "DATADIR", "USERDIR", "PATHSEP", "system", "renderer" },
}
-- So do the check's plugins.
files["integrations/lite-xl/test"] = { read_globals = { "system", "renderer" } }

-- A Prosody module runs with its module object, and Prosody's globals.
files["integrations/prosody"] = { globals = { "module" }, read_globals = { "prosody" } }
-- mod_noophook also gives debug.sethook and debug.gethook the no-op hook's
-- answers, as perfmon's init.lua does for its own hook.
files["bench/mod_noophook.lua"] = {
  globals = { "module", debug = { fields = { "sethook", "gethook" } } },
}

-- A method need not use its object.
ignore = { "212/self" }

-- Specs and benchmarks keep values alive in tables nobody reads (241), and
-- drop references (x = nil) for the collector to take them (311).
files["spec"] = { ignore = { "241", "311" } }
files["bench"] = { ignore = { "241", "311" } }
-- The watcher's spec reads what the watcher writes to io.stderr.
files["spec/watcher_spec.lua"] = { ignore = { "241", "311" }, globals = { io = { fields = { "stderr" } } } }

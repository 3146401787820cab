rockspec_format = "3.0"
package = "perfmon"
version = "scm-1"

source = {
  -- Placeholder: build from a checkout with `luarocks make`.
  url = "git+file://.",
}

description = {
  summary = "Tells a Lua host which plugin, page or sandbox is making it slow",
  detailed = [[
perfmon attributes the CPU time of a Lua 5.4 state to performance groups
(plugins, pages, sandboxes), after the design of Firefox's Performance Stats.
]],
}

-- On Debian, lua-cjson comes from the Debian package of that name, which
-- luarocks does not see (Debian installs no rock manifest for it).  A plain
-- `luarocks make` would then try to download it; tools/luarocks-make-test
-- declares it as provided by the system (rocks_provided) instead.
dependencies = {
  "lua >= 5.4, < 5.5",
  "lua-cjson",
}

-- Both lists below must match the files in src/**.c and lua/**.lua exactly:
-- tools/luarocks-make-test fails when they drift apart.
build = {
  type = "builtin",
  modules = {
    ["perfmon.core"] = {
      sources = {
        "src/alert.c",
        "src/chunk.c",
        "src/clock.c",
        "src/context.c",
        "src/fleet.c",
        "src/frame.c",
        "src/group.c",
        "src/hook.c",
        "src/host.c",
        "src/index.c",
        "src/lalert.c",
        "src/largs.c",
        "src/lgroup.c",
        "src/lhooks.c",
        "src/lmarkers.c",
        "src/lmonitor.c",
        "src/lperfmon.c",
        "src/lstats.c",
        "src/lupvalues.c",
        "src/lwatcher.c",
        "src/map.c",
        "src/mem.c",
        "src/monitor.c",
        "src/path.c",
        "src/proto.c",
        "src/resolve.c",
        "src/sampled.c",
        "src/sampler.c",
        "src/source.c",
        "src/state.c",
        "src/stopwatch.c",
        "src/trap.c",
        "src/watch.c",
        "src/wrapper.c",
        "src/profiler/coroutines.c",
        "src/profiler/lprofiler.c",
        "src/profiler/profiler.c",
        "src/profiler/records.c",
        "src/profiler/sample.c",
      },
      incdirs = { "src", "src/profiler" },
      -- CMakeLists.txt builds with -std=c11 and the same define; the builtin
      -- backend takes compiler flags only from CFLAGS (see the test script).
      defines = { "_POSIX_C_SOURCE=200809L" },
    },
    ["perfmon"] = "lua/perfmon/init.lua",
    ["perfmon.args"] = "lua/perfmon/args.lua",
    ["perfmon.buckets"] = "lua/perfmon/buckets.lua",
    ["perfmon.busted"] = "lua/perfmon/busted.lua",
    ["perfmon.busted.assertions"] = "lua/perfmon/busted/assertions.lua",
    ["perfmon.busted.budget"] = "lua/perfmon/busted/budget.lua",
    ["perfmon.busted.groups"] = "lua/perfmon/busted/groups.lua",
    ["perfmon.busted.ledger"] = "lua/perfmon/busted/ledger.lua",
    ["perfmon.busted.leftovers"] = "lua/perfmon/busted/leftovers.lua",
    ["perfmon.busted.options"] = "lua/perfmon/busted/options.lua",
    ["perfmon.busted.report"] = "lua/perfmon/busted/report.lua",
    ["perfmon.flamegraph"] = "lua/perfmon/flamegraph.lua",
    ["perfmon.fleet"] = "lua/perfmon/fleet.lua",
    ["perfmon.gecko"] = "lua/perfmon/gecko.lua",
    ["perfmon.loader"] = "lua/perfmon/loader.lua",
    ["perfmon.module"] = "lua/perfmon/module.lua",
    ["perfmon.openmetrics"] = "lua/perfmon/openmetrics.lua",
    ["perfmon.plugin_watcher"] = "lua/perfmon/plugin_watcher.lua",
    ["perfmon.profiler"] = "lua/perfmon/profiler.lua",
    ["perfmon.table"] = "lua/perfmon/table.lua",
    ["perfmon.text"] = "lua/perfmon/text.lua",
    ["perfmon.watcher"] = "lua/perfmon/watcher.lua",
    ["perfmon.where"] = "lua/perfmon/where.lua",
  },
}

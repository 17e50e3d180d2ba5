"""Names of programs the analysis treats specially: where standard programs live, which fetch
from the network, which run scripts, which answer a version query without doing anything."""

STD_BIN_DIRS = frozenset({"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin"})
DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "nc", "ncat", "socat"})
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "ash"})
INTERPRETERS = SHELLS | frozenset(
    {"python", "python2", "python3", "perl", "ruby", "node", "nodejs", "php", "lua", "eval", "source", ".", "tclsh", "deno", "bun"}
)
VERSION_PROBES = frozenset(
    {"python", "python3", "node", "ruby", "perl", "go", "rustc", "cargo", "gcc", "cc", "clang",
     "java", "javac", "npm", "pip", "pip3", "bash", "git", "make", "cmake", "uv", "deno", "bun"}
)

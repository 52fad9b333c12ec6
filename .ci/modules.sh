# The modules of this repository, as go.work lists them (go.work is the one
# list): sourced by .ci/run, .ci/tidy and .ci/modcheck. The root module is
# the library; every other one is a directory with a go.mod of its own.
mapfile -t all_modules < <(go work edit -json | python3 -c 'import json,sys; [print(u["DiskPath"].removeprefix("./")) for u in json.load(sys.stdin)["Use"]]')
nested_modules=()
for m in "${all_modules[@]}"; do [ "$m" = . ] || nested_modules+=("$m"); done

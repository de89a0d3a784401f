# Bash completion of ntblend (installed as share/bash-completion/completions/ntblend).
#
# Completes the commands, their actions and options, and the names of the fabrics, hosts,
# adapters, switches, devices and VMs of the fabric in use (--fabric on the line, else
# $NTBLEND_FABRIC, else "default"). Nothing about the commands is written down here: they
# come from `ntblend --help`, and each command's forms from `ntblend help COMMAND` (its usage
# line and the lines of its command table), so the completion follows the program. The
# placeholders of those forms say what a word is: H a host; A and B a host, adapter or
# switch; NAME, DEVICE, DEV and SEL a device (NAME of `vm` a running VM, but a new one for
# `vm start`); FILE a file; DIR a directory; CMD a command.

# _ntblend_names KIND: `ntblend names KIND` for the fabric of the line.
_ntblend_names() {
    local -a f=()
    [[ -n $_ntblend_fabric ]] && f=(--fabric "$_ntblend_fabric")
    "$_ntblend_prog" "${f[@]}" names "$1" 2>/dev/null
}

# _ntblend_forms CMD: the forms of CMD, one a line, brackets dropped ("device lend NAME --to H").
_ntblend_forms() {
    "$_ntblend_prog" help "$1" 2>/dev/null | awk -v c="$1" '
        NR == 1 && sub(/^usage: ntblend /, "") { print; next }
        index($0, "  " c " ") == 1 { sub(/^ +/, ""); sub(/  .*/, ""); print }' |
        tr -d '[]'
}

# _ntblend_words CUR PLACEHOLDER: the words a placeholder of a form may be (COMPREPLY is set).
# $cmd and $pos are the caller's: the command, and its words so far.
_ntblend_words() {
    local cur=$1 ph=$2
    if [[ $cmd == vm && $ph == NAME ]]; then
        [[ ${pos[0]-} == start ]] && ph=NEW || ph=VM
    fi
    case "$ph" in
    H) mapfile -t COMPREPLY < <(compgen -W "$(_ntblend_names hosts)" -- "$cur") ;;
    A | B)
        mapfile -t COMPREPLY < <(compgen -W "$(_ntblend_names hosts; _ntblend_names adapters
                                              _ntblend_names switches)" -- "$cur") ;;
    VM) mapfile -t COMPREPLY < <(compgen -W "$(_ntblend_names vms)" -- "$cur") ;;
    NAME | DEVICE | DEV | SEL) mapfile -t COMPREPLY < <(compgen -W "$(_ntblend_names devices)" -- "$cur") ;;
    FABRIC) mapfile -t COMPREPLY < <(compgen -W "$(_ntblend_names fabrics)" -- "$cur") ;;
    FILE) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
    DIR) compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -d -- "$cur") ;;
    CMD) mapfile -t COMPREPLY < <(compgen -c -- "$cur") ;;
    *) COMPREPLY=() ;;
    esac
}

_ntblend() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    local _ntblend_prog=${COMP_WORDS[0]} _ntblend_fabric=${NTBLEND_FABRIC:-}
    local cmd="" i w
    local -a pos=() # the command's positional words typed so far
    local dashdash=-1
    COMPREPLY=()
    # The line so far: global options, the command, its words.
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if ((dashdash >= 0)); then continue; fi
        case "$w" in
        --fabric) _ntblend_fabric=${COMP_WORDS[i + 1]}; ((i++)); continue ;;
        --fabric=*) _ntblend_fabric=${w#--fabric=}; continue ;;
        --) [[ -n $cmd ]] && dashdash=$i; continue ;;
        -*)
            # An option that takes a value (a placeholder follows it in a form) skips it.
            if [[ -n $cmd ]] && _ntblend_forms "$cmd" | grep -qE -- "(^| )$w [A-Z]+( |$)"; then
                ((i++))
            fi
            continue ;;
        esac
        if [[ -z $cmd ]]; then cmd=$w; else pos+=("$w"); fi
    done
    # After `run ... --`: the program and its arguments.
    if ((dashdash >= 0)); then
        if ((COMP_CWORD == dashdash + 1)); then
            mapfile -t COMPREPLY < <(compgen -c -- "$cur")
        else
            compopt -o default 2>/dev/null
        fi
        return
    fi
    if [[ $prev == --fabric ]]; then
        _ntblend_words "$cur" FABRIC
        return
    fi
    if [[ -z $cmd ]]; then
        if [[ $cur == -* ]]; then
            mapfile -t COMPREPLY < <(compgen -W "--fabric --help --version" -- "$cur")
        else
            local cmds
            cmds=$("$_ntblend_prog" --help 2>/dev/null |
                awk '/^commands:$/ { on = 1; next } on && /^$/ { exit } on { print $1 }')
            mapfile -t COMPREPLY < <(compgen -W "$cmds help" -- "$cur")
        fi
        return
    fi
    if [[ $cmd == help ]]; then
        ((${#pos[@]} == 0)) || return
        local cmds
        cmds=$("$_ntblend_prog" --help 2>/dev/null |
            awk '/^commands:$/ { on = 1; next } on && /^$/ { exit } on { print $1 }')
        mapfile -t COMPREPLY < <(compgen -W "$cmds" -- "$cur")
        return
    fi
    local forms
    forms=$(_ntblend_forms "$cmd")
    [[ -n $forms ]] || return
    # The value of an option: what its placeholder says.
    if [[ $prev == -* ]]; then
        local ph
        ph=$(grep -oE -- "(^| )$prev [A-Z]+" <<<"$forms" | head -n1 | awk '{ print $NF }')
        if [[ -n $ph ]]; then
            _ntblend_words "$cur" "$ph"
            return
        fi
    fi
    if [[ $cur == -* ]]; then
        # The options of the forms, and of the command's option table ("  -v, -vv  ...").
        local opts
        opts=$({ printf '%s\n' "$forms"
                 "$_ntblend_prog" help "$cmd" 2>/dev/null | grep -E '^  -' | sed -E 's/  +[^ -].*//'
               } | grep -oE -- '(^| )-{1,2}[a-zA-Z][a-zA-Z-]*' | tr -d ' ' | sort -u)
        mapfile -t COMPREPLY < <(compgen -W "$opts --fabric --help" -- "$cur" | awk '!seen[$0]++')
        return
    fi
    # A positional word: what the forms that match the words so far have in its place.
    local form t k n want
    local -a toks ptoks words=()
    while IFS= read -r form; do
        read -r -a toks <<<"$form"
        ptoks=()
        for ((k = 1; k < ${#toks[@]}; k++)); do
            t=${toks[k]}
            case "$t" in
            --) break ;;
            -*) [[ ${toks[k + 1]-} =~ ^[A-Z]+$ ]] && ((k++)); continue ;;
            ...) continue ;;
            esac
            ptoks+=("$t")
        done
        n=${#pos[@]}
        ((n < ${#ptoks[@]})) || continue
        for ((k = 0; k < n; k++)); do
            t=${ptoks[k]}
            [[ $t =~ ^[A-Z] ]] && continue
            [[ "|$t|" == *"|${pos[k]}|"* ]] || continue 2
        done
        want=${ptoks[n]%%.*}
        if [[ $want == FILE || $want == DIR || $want == CMD ]]; then
            _ntblend_words "$cur" "$want"
            return
        elif [[ $want =~ ^[A-Z] ]]; then
            _ntblend_words "$cur" "$want"
            words+=("${COMPREPLY[@]}")
        else
            words+=(${want//|/ })
        fi
    done <<<"$forms"
    mapfile -t COMPREPLY < <(compgen -W "${words[*]}" -- "$cur" | awk '!seen[$0]++')
}
complete -F _ntblend ntblend

# help2roff.awk: a manual page (man(7) roff) from a program's --help text, so that the two
# say the same thing (tools/man/gen-man.sh runs it on every installed program's help).
# It reads the layout ntblend's help texts share:
#
#   PROG - short description           (optional: the NAME line)
#   usage: PROG ...                    the SYNOPSIS (indented or "   or:" lines continue it)
#
#   one line ending in '.'             (optional, right after usage: the NAME line)
#   paragraphs at column 0             DESCRIPTION, filled
#   heading:                           a section (OPTIONS, EXAMPLES, ...); "exit status: ..."
#                                      and "environment: ..." start one with text
#   TERM  description                  a tagged paragraph, continued by the lines indented
#        continued                     deeper (option and command tables, definition lists)
#     command line                     anything else indented: verbatim (examples)
#
# Variables (-v): name (page name, e.g. ntblend-up), title (as shown in the header),
# section, version, date, desc (the NAME line when the text has none), seealso (a list of
# "page(section)" separated by spaces).

function esc(s) {
    gsub(/\\/, "\\e", s)
    gsub(/-/, "\\-", s)
    return s
}
# A line of text as roff input: no request dots or quotes at its start.
function line(s) {
    s = esc(s)
    if (s ~ /^[.']/) s = "\\&" s
    return s
}
function indent(s,    m) {
    match(s, /^ */)
    return RLENGTH
}
function trim(s) {
    sub(/^[ \t]+/, "", s)
    sub(/[ \t]+$/, "", s)
    return s
}
function heading(s) {
    s = toupper(trim(s))
    sub(/:$/, "", s)
    if (s == "EXAMPLE") s = "EXAMPLES"
    return s
}
# Known headings that may carry text on the same line.
function inline_heading(s) {
    return s ~ /^(exit status|environment|files|notes|see also): /
}

{
    sub(/\r$/, "")
    raw[++n] = $0
}

END {
    if (title == "") title = toupper(name)
    if (section == "") section = 1
    i = 1
    # PROG - description
    if (raw[i] ~ /^[^ ]+ - ./) {
        if (desc == "") { desc = raw[i]; sub(/^[^ ]+ - /, "", desc) }
        i++
        while (i <= n && raw[i] == "") i++
    }
    # usage: lines
    nsyn = 0
    if (tolower(raw[i]) ~ /^usage: /) {
        s = raw[i]; sub(/^[Uu]sage: +/, "", s); syn[++nsyn] = s; i++
        while (i <= n && raw[i] ~ /^ +[^ ]/) {
            s = trim(raw[i]); sub(/^or: +/, "", s); syn[++nsyn] = s; i++
        }
        while (i <= n && raw[i] == "") i++
    }
    # One line ending in '.', then a blank line: the summary of the command.
    if (i < n && raw[i] ~ /^[^ ].*\.$/ && raw[i + 1] == "") {
        if (desc == "") { desc = raw[i]; sub(/\.$/, "", desc) }
        i += 2
    }
    if (desc == "") {
        print "help2roff: " name ": no description (a 'PROG - text' line or a summary)" > "/dev/stderr"
        exit 1
    }

    printf ".TH \"%s\" \"%s\" \"%s\" \"ntblend %s\" \"ntblend manual\"\n", title, section, date, version
    print ".SH NAME"
    print esc(name) " \\- " esc(desc)
    if (nsyn) {
        print ".SH SYNOPSIS"
        print ".nf"
        for (k = 1; k <= nsyn; k++) {
            s = syn[k]
            if (match(s, /^[^ ]+/)) {
                prog = substr(s, 1, RLENGTH); rest = substr(s, RLENGTH + 1)
                print "\\fB" line(prog) "\\fR" esc(rest)
            } else print line(s)
        }
        print ".fi"
    }
    print ".SH DESCRIPTION"
    sect = "DESCRIPTION"
    # A help text that starts with a section of its own: say what the program is first.
    for (k = i; k <= n && raw[k] == ""; k++) ;
    if (k <= n && (raw[k] ~ /^[A-Za-z][A-Za-z -]*:$/ || inline_heading(raw[k]))) {
        print ".PP"
        print line(toupper(substr(desc, 1, 1)) substr(desc, 2) ".")
    }
    para = 0     # inside a filled paragraph
    verb = 0     # inside a verbatim block
    for (; i <= n; i++) {
        s = raw[i]
        if (s == "") {
            if (verb) { print ".fi"; print ".RE"; verb = 0 }
            para = 0
            continue
        }
        ind = indent(s)
        # Headings
        if (ind == 0 && (s ~ /^[A-Za-z][A-Za-z -]*:$/ || inline_heading(s))) {
            if (verb) { print ".fi"; print ".RE"; verb = 0 }
            h = s; text = ""
            if (inline_heading(s)) { h = s; sub(/: .*/, "", h); text = s; sub(/^[^:]*: /, "", text) }
            sect = heading(h)
            print ".SH " esc(sect)
            para = 0
            if (text != "") { print ".PP"; print line(text); para = 1 }
            continue
        }
        nind = (i < n && raw[i + 1] != "") ? indent(raw[i + 1]) : -1
        body = substr(s, ind + 1)
        gap = match(body, /[^ ]  +[^ ]/)
        # Where the description starts; lines indented that far (or, after a term alone on
        # its line, well deeper than the term) continue it.
        if (gap) {
            term = substr(body, 1, gap); d = substr(body, gap + 1)
            col = ind + gap + indent(d); d = trim(d); cont = col - 2
        } else if (nind > ind && substr(s, nind, 1) == " " && substr(s, nind + 1, 1) ~ /[^ ]/) {
            # "start: power a host on ..." continued at the column of "power".
            term = substr(s, ind + 1, nind - ind); d = substr(s, nind + 1); cont = nind
        } else {
            term = body; d = ""; cont = ind + 4
        }
        # A tagged paragraph: a term with its description beside or below it, an indented
        # "TERM  description" line, or one at column 0 whose term is one word (not in
        # EXAMPLES, where every indented line is a command line).
        if (sect != "EXAMPLES" && ((nind > ind && nind >= cont) || (ind > 0 && gap) ||
                                   (gap && trim(term) !~ / /))) {
            if (verb) { print ".fi"; print ".RE"; verb = 0 }
            print ".TP"
            print "\\fB" line(trim(term)) "\\fR"
            if (d != "") print line(d)
            while (i < n && raw[i + 1] != "" && indent(raw[i + 1]) > ind && indent(raw[i + 1]) >= cont) {
                i++
                print line(trim(raw[i]))
            }
            para = 0
            continue
        }
        if (ind > 0) {
            if (!verb) { print ".RS 2"; print ".nf"; verb = 1 }
            print line(substr(s, 3))
            continue
        }
        if (verb) { print ".fi"; print ".RE"; verb = 0 }
        if (!para) { print ".PP"; para = 1 }
        print line(s)
    }
    if (verb) { print ".fi"; print ".RE" }
    if (seealso != "") {
        print ".SH SEE ALSO"
        m = split(seealso, pages, / +/)
        out = ""
        for (k = 1; k <= m; k++) {
            p = pages[k]
            if (match(p, /\([0-9a-z]+\)$/)) p = "\\fB" esc(substr(p, 1, RSTART - 1)) "\\fR" substr(p, RSTART)
            out = out (k > 1 ? ",\n" : "") p
        }
        print out
    }
}

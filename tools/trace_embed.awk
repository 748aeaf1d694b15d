# Turn the page's template files into C strings for ibemu trace show
# (tools/trace.h): each FILE named trace_page.EXT becomes
#   const char trace_page_EXT[] = "...";
# awk -f tools/trace_embed.awk FILE... > trace_page.c
BEGIN {
	print "/* Made from the page's template by tools/trace_embed.awk. */"
	print "#include \"tools/trace.h\""
}
FNR == 1 {
	if (NR > 1)
		print ";"
	name = FILENAME
	sub(/.*\//, "", name)
	gsub(/[^A-Za-z0-9]/, "_", name)
	print "const char " name "[] ="
	printf "\t\"\""
}
{
	line = ""
	for (i = 1; i <= length($0); i++) {
		c = substr($0, i, 1)
		line = line (c == "\\" || c == "\"" ? "\\" : "") c
	}
	printf "\n\t\"%s\\n\"", line
}
END {
	print ";"
}

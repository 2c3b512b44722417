# merge module files: the merge step of multi-shard SELECTs (typed values, exact decimals,
# streaming k-way merge, aggregate combine and the final combine SQL)
libneki_a_SOURCES += src/merge/merge.c src/merge/merge_val.c src/merge/merge_num.c \
	src/merge/merge_agg.c src/merge/merge_final.c src/merge/merge_arr.c \
	src/merge/merge_kinds.c \
	src/merge/merge_range.c
noinst_HEADERS += include/neki/merge.h src/merge/merge_int.h

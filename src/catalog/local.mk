# catalog module files: the model, its loader, the topology rules that need it, the image
libneki_a_SOURCES += src/catalog/model.c src/catalog/load.c src/catalog/load_sql.c \
	src/catalog/check.c src/catalog/image.c src/catalog/image_read.c \
	src/catalog/view.c src/catalog/oidmap.c
noinst_HEADERS += include/neki/catalog.h include/neki/catalog_image.h src/catalog/cat_int.h \
	src/catalog/image_int.h

/*
 * fuzz_ini.c - the configuration file (src/config: the ini parser, %include, the settings
 * table and every section). The input is cut at NUL bytes into main.ini, a.ini and b.ini,
 * written into a private directory (the process's working directory), so `%include a.ini`
 * reads the second part. cfg_load("main.ini") must succeed or refuse with an error that
 * names what is wrong; a text without %include must get the same answer from
 * cfg_load_string(). Paths under /dev, /proc and /sys are not read (a %include of
 * /dev/zero would never end).
 */
#include "fuzz.h"

#include <unistd.h>

#include "neki/config.h"

static const char *const files[] = { "main.ini", "a.ini", "b.ini" };

static char dir[] = "/tmp/neki-fuzz-ini.XXXXXX";

/* At exit: the files and the directory go. */
static void
remove_dir(void)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(files); i++)
		(void)unlink(files[i]);
	(void)chdir("/");
	(void)rmdir(dir);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	FZ_CHECK(mkdtemp(dir) != NULL && chdir(dir) == 0);
	atexit(remove_dir);
	return 0;
}

static void
write_file(const char *name, const uint8_t *d, size_t n)
{
	FILE *f = fopen(name, "w");

	FZ_CHECK(f != NULL);
	FZ_CHECK(fwrite(d, 1, n, f) == n || n == 0);
	FZ_CHECK(fclose(f) == 0);
}

static bool
has(const uint8_t *d, size_t n, const char *s)
{
	return memmem(d, n, s, strlen(s)) != NULL;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *d = data, *main_text = data, *part;
	size_t n = size, main_len = 0;
	struct nk_error err, err2;
	struct cfg *c, *c2;
	char *text;

	if (has(data, size, "/dev") || has(data, size, "/proc") || has(data, size, "/sys"))
		return 0;
	for (size_t i = 0; i < NK_ARRAY_LEN(files); i++) {
		size_t len = fz_part(&d, &n, &part);

		if (i == 0) {
			main_text = part;
			main_len = len;
		}
		write_file(files[i], part, len);
	}
	c = cfg_load("main.ini", &err);
	FZ_CHECK(c != NULL || err.message[0] != '\0');
	if (!has(main_text, main_len, "%include")) {
		text = fz_strndup(main_text, main_len);
		c2 = cfg_load_string("main.ini", text, &err2);
		FZ_CHECK((c == NULL) == (c2 == NULL));
		FZ_CHECK(c != NULL || strcmp(err.message, err2.message) == 0);
		if (c2)
			cfg_unref(c2);
		free(text);
	}
	if (c)
		cfg_unref(c);
	return 0;
}

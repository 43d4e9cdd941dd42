/*
 * kvmlab-dirty: dirty guest memory at a set rate, prove it intact, and beat a heart.
 *
 *   kvmlab-dirty MEM_MIB RATE_MIBS STATEDIR [PROBE]
 *
 * Writes every 4 KiB page of a MEM_MIB working set, page after page, pass after pass,
 * at RATE_MIBS MiB/s (0: as fast as it can). Pass c leaves in every word of a page a
 * value computed from (c, page, word), and word 0 holds c itself: at any instant the
 * pages before the cursor hold pass c and the rest pass c - 1, so any page whose content
 * is not exactly one of those two (a lost write, a stale or foreign page after a
 * migration) is found. This is the idea of QEMU's migration-test, applied to every word.
 *
 * Every page is checked before it is rewritten: pass c first reads each word of a page
 * against pass c - 1, so a page that changed behind the program's back (a page corrupted
 * in a migration, a word poked by another process) is caught at its first touch, before
 * the new pass hides it. The first such page is appended to STATEDIR/verify.log at once
 * ("0 BAD touched ..."); the count is kept and reported by every check below.
 *
 * SIGUSR1: check every page now (between two chunks) and append one line to
 * STATEDIR/verify.log: "N ok pages=P pass=C cursor=X" or "N BAD bad=K touchbad=T
 * first=I word=W expected=E found=F pass=C seen=scan|touch" (the first bad page found by
 * this scan, or else the first found at a touch). STATEDIR/status is rewritten every second
 * ("passes=.. pages=.. bytes=.. maxgap_us=.." with the longest gap the program saw
 * in its own progress, by the guest's clock). PROBE (a virtio-serial port) gets a line
 * with a sequence number every 10 ms of guest time: the host timestamps their arrival,
 * which is how a stop of the whole guest is seen from outside. SIGTERM/SIGINT: exit 0.
 *
 *   kvmlab-echo PORT        (this program under that name, or kvmlab-dirty --echo PORT)
 *
 * Echoes every UDP datagram that reaches PORT back to its sender, until SIGTERM/SIGINT:
 * the guest's end of the network probe, whose gaps the host times through a migration.
 *
 *   kvmlab-echo PORT TARGET TARGET_PORT COUNTS    (a peer guest's relay)
 *
 * Relays: a datagram from TARGET:TARGET_PORT goes back to whoever sent the last one from
 * elsewhere, any other goes on to TARGET:TARGET_PORT from PORT. A peer guest on a lab
 * network runs this between the host's prober and a migrating guest's echo, so the
 * probes the guest answers come from a peer, as an operator's ping would. On
 * SIGTERM/SIGINT it writes "in out back home" to COUNTS (datagrams from the prober, sent
 * on to the target, back from the target, returned to the prober) and exits 0. Once its
 * port is bound it prints "listening on UDP port PORT" on stdout.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096
#define WORDS (PAGE / 8)
#define CHUNK 16 /* pages between two clock checks (64 KiB) */
#define BEAT_NS 10000000LL

static volatile sig_atomic_t want_verify, want_stop;

static void on_usr1(int sig) { (void)sig; want_verify = 1; }
static void on_term(int sig) { (void)sig; want_stop = 1; }

static inline uint64_t word(uint64_t pass, uint64_t page, uint64_t j)
{
	if (j == 0)
		return pass;
	uint64_t x = (pass * 0x9E3779B97F4A7C15ULL) ^ (page << 9 | j);
	x ^= x >> 31;
	x *= 0xBF58476D1CE4E5B9ULL;
	return x ^ (x >> 29);
}

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long last_ns, started_ns;
static unsigned long long maxgap;

/* The clock, noting the longest gap between two readings (after the first second). */
static long long tick(void)
{
	long long t = now_ns();
	if (last_ns && t - last_ns > (long long)maxgap && t - started_ns > 1000000000LL)
		maxgap = (unsigned long long)(t - last_ns);
	last_ns = t;
	return t;
}

static void fill(uint64_t *p, uint64_t pass, uint64_t page)
{
	for (uint64_t j = 0; j < WORDS; j++)
		p[j] = word(pass, page, j);
}

/* The first page found wrong at a touch, and how many were. */
static struct {
	uint64_t count, page, at, expected, found, pass;
} touched;

static void put_file(const char *dir, const char *name, const char *text, int append);

/* Rewrite a page for pass `pass` after checking it still holds pass - 1, every word. */
static void refill(const char *dir, uint64_t *p, uint64_t pass, uint64_t page)
{
	for (uint64_t j = 0; j < WORDS; j++) {
		uint64_t want = word(pass - 1, page, j);
		if (p[j] != want) {
			if (!touched.count++) {
				touched.page = page;
				touched.at = j;
				touched.expected = want;
				touched.found = p[j];
				touched.pass = pass - 1;
				char line[512];
				snprintf(line, sizeof line,
					 "0 BAD touched first=%llu word=%llu expected=%#llx "
					 "found=%#llx pass=%llu\n",
					 (unsigned long long)page, (unsigned long long)j,
					 (unsigned long long)want, (unsigned long long)p[j],
					 (unsigned long long)(pass - 1));
				put_file(dir, "verify.log", line, 1);
			}
			break;
		}
	}
	fill(p, pass, page);
}

static void put_file(const char *dir, const char *name, const char *text, int append)
{
	char path[4096], tmp[4200];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (append) {
		int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			ssize_t n = write(fd, text, strlen(text));
			(void)n;
			fsync(fd);
			close(fd);
		}
		return;
	}
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return;
	ssize_t n = write(fd, text, strlen(text));
	(void)n;
	close(fd);
	rename(tmp, path);
}

/* Check every page against the pass it must hold; append the verdict to verify.log. */
static void verify(const char *dir, uint64_t *mem, uint64_t pages, uint64_t pass,
		   uint64_t cursor, unsigned long checks)
{
	uint64_t bad = 0, first = 0, expected = 0, found = 0, at = 0;
	for (uint64_t i = 0; i < pages; i++) {
		uint64_t want = i < cursor ? pass : pass - 1;
		uint64_t *p = mem + i * WORDS;
		for (uint64_t j = 0; j < WORDS; j++) {
			if (p[j] != word(want, i, j)) {
				if (!bad++) {
					first = i;
					at = j;
					expected = word(want, i, j);
					found = p[j];
				}
				break;
			}
		}
	}
	char line[512];
	if (bad)
		snprintf(line, sizeof line,
			 "%lu BAD bad=%llu touchbad=%llu first=%llu word=%llu expected=%#llx "
			 "found=%#llx pass=%llu seen=scan\n",
			 checks, (unsigned long long)bad, (unsigned long long)touched.count,
			 (unsigned long long)first, (unsigned long long)at,
			 (unsigned long long)expected, (unsigned long long)found,
			 (unsigned long long)(first < cursor ? pass : pass - 1));
	else if (touched.count)
		snprintf(line, sizeof line,
			 "%lu BAD bad=0 touchbad=%llu first=%llu word=%llu expected=%#llx "
			 "found=%#llx pass=%llu seen=touch\n",
			 checks, (unsigned long long)touched.count,
			 (unsigned long long)touched.page, (unsigned long long)touched.at,
			 (unsigned long long)touched.expected, (unsigned long long)touched.found,
			 (unsigned long long)touched.pass);
	else
		snprintf(line, sizeof line, "%lu ok pages=%llu pass=%llu cursor=%llu\n", checks,
			 (unsigned long long)pages, (unsigned long long)pass,
			 (unsigned long long)cursor);
	put_file(dir, "verify.log", line, 1);
}

/* A UDP socket on PORT, any address; -2 for a bad PORT, -1 when it cannot listen. */
static int udp_socket(const char *port_text, unsigned long *port)
{
	char *end;
	*port = strtoul(port_text, &end, 10);
	if (*end || *port == 0 || *port > 65535) {
		fprintf(stderr, "kvmlab-dirty: bad PORT %s\n", port_text);
		return -2;
	}
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons((uint16_t)*port)};
	at.sin_addr.s_addr = htonl(INADDR_ANY);
	if (fd < 0 || bind(fd, (struct sockaddr *)&at, sizeof at) < 0) {
		fprintf(stderr, "kvmlab-dirty: cannot listen on UDP port %lu: %s\n", *port,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	struct sigaction sa = {0}; /* no SA_RESTART: a signal ends the wait in recvfrom */
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	return fd;
}

static int echo(const char *port_text)
{
	unsigned long port;
	int fd = udp_socket(port_text, &port);
	if (fd < 0)
		return fd == -2 ? 2 : 1;
	char buf[2048];
	while (!want_stop) {
		struct sockaddr_in from;
		socklen_t len = sizeof from;
		ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &len);
		if (n < 0)
			continue; /* EINTR (a stop is looked at above), or a transient error */
		ssize_t w = sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, len);
		(void)w;
	}
	return 0;
}

static int relay(const char *port_text, const char *target_text, const char *target_port_text,
		 const char *counts)
{
	struct sockaddr_in target = {.sin_family = AF_INET};
	char *end;
	unsigned long target_port = strtoul(target_port_text, &end, 10);
	if (inet_pton(AF_INET, target_text, &target.sin_addr) != 1 || *end || target_port == 0 ||
	    target_port > 65535) {
		fprintf(stderr, "kvmlab-dirty: bad TARGET %s:%s\n", target_text, target_port_text);
		return 2;
	}
	target.sin_port = htons((uint16_t)target_port);
	unsigned long port;
	int fd = udp_socket(port_text, &port);
	if (fd < 0)
		return fd == -2 ? 2 : 1;
	printf("listening on UDP port %lu\n", port); /* what kvmlab waits for */
	fflush(stdout);
	unsigned long long in = 0, out = 0, back = 0, home = 0;
	struct sockaddr_in prober = {0};
	int have_prober = 0;
	char buf[2048];
	while (!want_stop) {
		struct sockaddr_in from;
		socklen_t len = sizeof from;
		ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &len);
		if (n < 0)
			continue;
		if (from.sin_addr.s_addr == target.sin_addr.s_addr &&
		    from.sin_port == target.sin_port) {
			back++;
			if (have_prober &&
			    sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&prober, sizeof prober) == n)
				home++;
			continue;
		}
		prober = from;
		have_prober = 1;
		in++;
		if (sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&target, sizeof target) == n)
			out++;
	}
	char line[128], tmp[4200];
	snprintf(line, sizeof line, "%llu %llu %llu %llu\n", in, out, back, home);
	snprintf(tmp, sizeof tmp, "%s.tmp", counts);
	int cfd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (cfd < 0 || write(cfd, line, strlen(line)) != (ssize_t)strlen(line) ||
	    rename(tmp, counts) < 0) {
		fprintf(stderr, "kvmlab-dirty: cannot write %s: %s\n", counts, strerror(errno));
		return 1;
	}
	close(cfd);
	return 0;
}

int main(int argc, char **argv)
{
	const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	if (strcmp(name, "kvmlab-echo") == 0 && argc == 2)
		return echo(argv[1]);
	if (strcmp(name, "kvmlab-echo") == 0 && argc == 5)
		return relay(argv[1], argv[2], argv[3], argv[4]);
	if (argc == 3 && strcmp(argv[1], "--echo") == 0)
		return echo(argv[2]);
	if (argc < 4 || argc > 5) {
		fprintf(stderr, "usage: kvmlab-dirty MEM_MIB RATE_MIBS STATEDIR [PROBE]\n"
				"       kvmlab-echo PORT [TARGET TARGET_PORT COUNTS]\n");
		return 2;
	}
	char *end;
	unsigned long mib = strtoul(argv[1], &end, 10);
	if (*end || mib == 0 || mib > (1UL << 20)) {
		fprintf(stderr, "kvmlab-dirty: bad MEM_MIB %s\n", argv[1]);
		return 2;
	}
	double rate = strtod(argv[2], &end);
	if (*end || rate < 0) {
		fprintf(stderr, "kvmlab-dirty: bad RATE_MIBS %s\n", argv[2]);
		return 2;
	}
	const char *dir = argv[3];
	int probe = argc == 5 ? open(argv[4], O_WRONLY | O_NONBLOCK | O_CLOEXEC) : -1;
	uint64_t pages = (uint64_t)mib * 256;
	uint64_t *mem = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (mem == MAP_FAILED) {
		fprintf(stderr, "kvmlab-dirty: cannot map %lu MiB: %s\n", mib, strerror(errno));
		return 1;
	}
	struct sigaction sa = {0};
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);

	for (uint64_t i = 0; i < pages; i++) /* pass 1, at full speed */
		fill(mem + i * WORDS, 1, i);
	uint64_t pass = 2, cursor = 0, passes = 1;
	unsigned long long written = 0, beat = 0;
	unsigned long checks = 0;
	long long start = tick(), next_beat = start, next_status = start;
	started_ns = start;
	const double ns_per_byte = rate > 0 ? 1e9 / (rate * 1048576.0) : 0;
	char text[256];
	put_file(dir, "verify.log", "", 0);
	while (!want_stop) {
		for (int k = 0; k < CHUNK && cursor < pages; k++, cursor++)
			refill(dir, mem + cursor * WORDS, pass, cursor);
		written += (unsigned long long)CHUNK * PAGE;
		if (cursor == pages) {
			cursor = 0;
			pass++;
			passes++;
		}
		if (want_verify) {
			want_verify = 0;
			verify(dir, mem, pages, pass, cursor, ++checks);
			last_ns = now_ns(); /* the check is not a stall of the guest */
		}
		long long t = tick();
		if (ns_per_byte > 0) { /* ahead of the rate: sleep, beating on the way */
			long long due = start + (long long)(written * ns_per_byte);
			while (t < due && !want_stop && !want_verify) {
				long long wake = due < next_beat ? due : next_beat;
				if (wake > t) {
					struct timespec ts = {(wake - t) / 1000000000LL,
							      (wake - t) % 1000000000LL};
					nanosleep(&ts, NULL);
				}
				t = tick();
				if (t >= next_beat && probe >= 0) {
					int n = snprintf(text, sizeof text, "%llu\n", ++beat);
					ssize_t w = write(probe, text, (size_t)n);
					(void)w;
					next_beat = t + BEAT_NS;
				}
			}
		}
		if (t >= next_beat && probe >= 0) {
			int n = snprintf(text, sizeof text, "%llu\n", ++beat);
			ssize_t w = write(probe, text, (size_t)n);
			(void)w;
			next_beat = t + BEAT_NS;
		}
		if (t >= next_status) {
			snprintf(text, sizeof text,
				 "passes=%llu pages=%llu bytes=%llu maxgap_us=%llu seconds=%.3f\n",
				 (unsigned long long)passes, (unsigned long long)pages, written,
				 maxgap / 1000, (t - start) / 1e9);
			put_file(dir, "status", text, 0);
			next_status = t + 1000000000LL;
		}
	}
	return 0;
}

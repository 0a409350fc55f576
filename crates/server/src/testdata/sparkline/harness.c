/* Feeds redis 7.0's own sparkline.c the samples of a latency event and
 * prints latencyCommandGenSparkeline's text (copied from latency.c, with
 * time(NULL) replaced by a fixed `now`). Input: event max now, then
 * "time latency" lines. The .out files next to it are its output.
 *
 * Build: copy sds.c, sds.h, sparkline.c and sparkline.h from redis 7.0's
 * src/ into a directory with this file and two shims:
 *   sdsalloc.h: s_malloc/s_realloc/s_free as malloc/realloc/free, and the
 *     s_*_usable variants as the same, setting *usable to the size;
 *   server.h: <stdlib.h>, <string.h>, <stdio.h>, "sds.h", "sparkline.h",
 *     and zmalloc/zrealloc/zfree/zstrdup as malloc/realloc/free/strdup;
 * then `gcc -I. -o harness harness.c sparkline.c sds.c -lm` and
 * `./harness < case.in > case.out`. */
#include "server.h"
#include <stdint.h>
#define LATENCY_GRAPH_COLS 80
int main(int argc, char **argv) {
    char event[256]; unsigned long tsmax; long now;
    if (scanf("%255s %lu %ld", event, &tsmax, &now) != 3) return 1;
    struct sequence *seq = createSparklineSequence();
    seq->labels = 0;
    sds graph = sdsempty();
    uint32_t min = 0, max = 0;
    long t; unsigned long lat;
    while (scanf("%ld %lu", &t, &lat) == 2) {
        int elapsed; char buf[64];
        if (seq->length == 0) { min = max = lat; }
        else { if (lat > max) max = lat; if (lat < min) min = lat; }
        elapsed = now - t;
        if (elapsed < 60) snprintf(buf,sizeof(buf),"%ds",elapsed);
        else if (elapsed < 3600) snprintf(buf,sizeof(buf),"%dm",elapsed/60);
        else if (elapsed < 3600*24) snprintf(buf,sizeof(buf),"%dh",elapsed/3600);
        else snprintf(buf,sizeof(buf),"%dd",elapsed/(3600*24));
        sparklineSequenceAddSample(seq,lat,buf);
    }
    graph = sdscatprintf(graph,
        "%s - high %lu ms, low %lu ms (all time high %lu ms)\n", event,
        (unsigned long) max, (unsigned long) min, (unsigned long) tsmax);
    for (int j = 0; j < LATENCY_GRAPH_COLS; j++) graph = sdscatlen(graph,"-",1);
    graph = sdscatlen(graph,"\n",1);
    graph = sparklineRender(graph,seq,LATENCY_GRAPH_COLS,4,SPARKLINE_FILL);
    fwrite(graph,1,sdslen(graph),stdout);
    return 0;
}

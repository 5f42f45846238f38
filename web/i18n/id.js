// i18n/id.js: the playground in Indonesian (same keys as en.js; the chapter's terms: komputasi
// asinkron, antrian, frontend dan backend, penghalang dan pemblokir, grafik ketergantungan, minibatch).
export default {
  'page.title': 'Ruang uji asyncnd: komputasi asinkron, secara langsung',
  'header.brandHtml': 'asyncnd <span>ruang uji</span>',
  'header.tagline': 'Bab “Komputasi Asinkron”, dijalankan langsung di mesin WebAssembly asyncnd, lengkap dengan gambar apa yang dikerjakan mesin.',
  'header.language': 'Bahasa',
  'header.threads': 'Thread pekerja',
  'header.reload': 'Muat ulang worker',
  'header.reloadTitle': 'Memulai ulang Web Worker dengan jumlah thread mesin sebanyak ini',
  'header.maxOps': 'Maks. operasi tertunda',
  'header.maxOpsTitle': 'Tekanan balik: pengantrian menunggu selama ada sebanyak ini operasi yang belum selesai, dalam antrian atau berjalan (kosong = bawaan mesin, 524288; 0 = tanpa batas)',
  'header.maxMB': 'Maks. MB tertunda',
  'header.maxMBTitle': 'Tekanan balik: pengantrian menunggu selama keluaran sebesar ini (MB) masih tertunda (kosong = bawaan mesin, seperempat dari heap 2 GiB; 0 = tanpa batas)',
  'header.boundDefault': 'bawaan',
  'header.stop': 'Hentikan',
  'header.stopTitle': 'Mengakhiri proses yang sedang berjalan dengan memulai ulang Web Worker, dengan jumlah thread pekerja yang dipilih',
  'status.starting': 'memuat modul…',
  'status.loading': { other: 'memuat modul dengan {count} thread mesin…' },
  'status.ready': { other: 'siap · {count} thread mesin · {backend} · thread tersedia (terisolasi lintas origin)' },
  'status.workerFailed': 'worker gagal dimulai: {why}',
  'status.unknownError': 'galat tidak dikenal',
  'status.notIsolated': 'thread tidak tersedia: halaman ini tidak terisolasi lintas origin',
  'status.notSecure': 'thread tidak tersedia: halaman ini tidak berada dalam konteks aman (http:// biasa ke mesin lain)',
  'banner.notIsolatedHtml': '<strong>Thread tidak tersedia di sini.</strong> Halaman ini tidak terisolasi lintas origin, sehingga peramban ' +
    'tidak memberikan <code>SharedArrayBuffer</code> yang dibutuhkan thread WebAssembly, dan mesin tidak dapat dimulai. ' +
    'Sajikan ruang uji dengan <code>make playground</code> (yang mengirim header <code>Cross-Origin-Opener-Policy: same-origin</code> dan ' +
    '<code>Cross-Origin-Embedder-Policy: require-corp</code>) lalu buka <code>http://127.0.0.1:8080/</code>, bukan URL file://; ' +
    'server lain harus mengirim dua header yang sama.',
  'banner.notSecureHtml': '<strong>Thread tidak tersedia di sini.</strong> Halaman ini dibuka lewat <code>http://</code> biasa dari mesin lain, ' +
    'dan itu bukan konteks aman: apa pun header yang dikirim server, peramban tidak menyediakan <code>SharedArrayBuffer</code>, ' +
    'yang dibutuhkan thread WebAssembly, sehingga mesin tidak dapat dimulai. Bukalah lewat HTTPS, atau melalui terowongan SSH ke ' +
    'server (<code>ssh -L 8080:127.0.0.1:8080 host</code>, lalu <code>http://127.0.0.1:8080/</code>): <code>localhost</code> dan ' +
    '<code>127.0.0.1</code> dianggap aman.',
  'intro.textHtml': 'Setiap panggilan ke mesin hanya <em>memasukkan</em> sebuah operasi ke antrian lalu kembali. Thread pekerja ' +
    'menjalankan operasi dalam antrian begitu data yang dibacanya siap: yang saling bebas dijalankan bersamaan, yang saling ' +
    'bergantung dijalankan berurutan. Kode Anda hanya menunggu di tempat ia membutuhkan nilai. Setiap panel di bawah menjalankan ' +
    'satu eksperimen dari bab ini di dalam Web Worker (halaman ini tidak pernah terblokir), menampilkan angka hasil pengukuran, dan ' +
    'lini masa apa yang dijalankan tiap thread mesin: gulir untuk memperbesar, seret untuk menggeser, klik dua kali untuk mengembalikan.',
  'footer.versions': 'asyncnd (WebAssembly, SIMD128, pthreads) · pustaka yang dibundel secara lokal: {list}',

  'error.workerRestarted': 'worker telah dimulai ulang',
  'error.notLoaded': 'modul belum dimuat',
  'error.notIsolated': 'halaman ini tidak terisolasi lintas origin: SharedArrayBuffer, dan karena itu thread WebAssembly, tidak tersedia',
  'error.noExperiment': 'tidak ada eksperimen bernama {name}',
  'error.oomHint': 'Memori modul penuh. Larik yang ditinggalkan sel kode baru dibebaskan saat pengumpul sampah berjalan (delete() langsung membebaskan satu larik); Muat ulang worker memulai mesin baru dengan seluruh memorinya.',

  // Fields the page refuses before running (inputs.js); {field} is the field's name
  'input.notNumber': '{field}: yang diketik bukan angka yang bisa ditampung kolom ini',
  'input.empty': '{field} kosong: isi nilai dari {min} sampai {max}',
  'input.rangeInt': '{field} = {value} ditolak: bilangan bulat dari {min} sampai {max}',
  'input.rangeStep': '{field} = {value} ditolak: dari {min} sampai {max} dengan langkah {step}',
  'input.boundOps': '{field} = {value} ditolak: bilangan bulat jumlah operasi, 0 atau lebih (kosong: bawaan mesin; 0: tanpa batas)',
  'input.boundMB': '{field} = {value} ditolak: jumlah MB, 0 atau lebih, boleh pecahan (kosong: bawaan mesin; 0: tanpa batas)',

  'panel.run': 'Jalankan',
  'panel.running': 'Berjalan…',
  'panel.runAgain': 'Jalankan lagi',
  'panel.failed': 'gagal',
  'panel.doneIn': 'selesai dalam {time}',
  'panel.timelineHint': 'Jalankan eksperimen untuk melihat apa yang dijalankan tiap thread mesin.',
  'panel.graphTitle': 'Grafik ketergantungan (dari profiler)',
  'timeline.title': 'Lini masa',
  'timeline.resetZoom': 'atur ulang zoom',
  'timeline.worker': 'pekerja {n}',
  'timeline.jsThread': 'thread JavaScript',
  'timeline.axis': 'milidetik sejak pengantrian pertama',
  'timeline.tooltip': '{name}: berjalan {ran}, mengantri {queued} sebelumnya',
  'timeline.opFailed': '(gagal)',
  'timeline.opSkipped': '(dilewati)',
  'timeline.empty': 'Tidak ada operasi mesin yang tercatat pada proses ini.',
  'timeline.lost': 'Catatan proses ini hilang bersama worker tempat proses itu berjalan.',
  'timeline.recorded': { other: '{count} operasi tercatat.' },
  'timeline.drawnOf': '{shown} pertama dari {total} yang digambar.',
  'timeline.help': 'Gulir untuk memperbesar, seret untuk menggeser, klik dua kali untuk mengembalikan.',
  'timeline.skew': 'Jam antar-thread berselisih setidaknya {time} pada proses ini (sebuah operasi tampak mulai sebelum operasi ' +
    'yang dibacanya selesai, di thread lain), jadi batang pada baris berbeda bisa bergeser sebanyak itu. Modul mengukur waktu ' +
    'semua thread dengan satu jam (performance.timeOrigin + now()); selisih berarti jam peramban bergeser.',
  'graph.truncated': '{shown} operasi pertama dari {total} yang digambar.',
  'graph.summary': '{ops}, {arrays}. Panah: dibaca oleh, ditulis oleh.',
  'graph.ops': { other: '{count} operasi' },
  'graph.arrays': { other: '{count} larik' },
  'axis.ms': 'milidetik',
  'axis.us': 'mikrodetik',

  'progress.starting': 'memulai',
  'progress.done': 'selesai',
  'progress.warmup': 'pemanasan',
  'progress.syncStep': 'sinkron {i}/{n}',
  'progress.queueing': 'mesin: memasukkan ke antrian',
  'progress.e2': 'menghitung z = x * y + 2',
  'progress.calling': 'memanggil {call}',
  'progress.twoDots': 'dua perkalian, lalu waitAll()',
  'progress.synchronous': 'sinkron',
  'progress.asynchronous': 'asinkron',
  'progress.timingPushes': 'mengukur pengantrian (t1)',
  'progress.profiling': 'memprofil (t2)',
  'progress.batch': '{mode}: minibatch {i}/{n}',
  'progress.jsAlone': 'JavaScript saja',
  'progress.bothAtOnce': 'keduanya sekaligus',

  'param.size': 'ukuran',
  'param.repeats': 'ulangan',
  'param.ops': 'operasi',
  'param.batches': 'minibatch',
  'param.boundMB': 'batas MB',

  'E1.title': 'Mengantri bukan berarti menghitung',
  'E1.explainHtml': 'Matriks acak (sepuluh berukuran 1000×1000 di bab ini; kolom ulangan dan ukuran mengubahnya), masing-masing dipakai dalam satu perkalian matriks. Proses <b>sinkron</b> menunggu ' +
    'setiap hasil sebelum lanjut, seperti NumPy. Proses <b>mesin</b> hanya memasukkan pekerjaan ke antrian: perulangannya kembali ' +
    'hampir seketika, dan biaya sebenarnya baru terlihat saat <code>nd.waitAll()</code> menunggu para pekerja selesai.',
  'E1.fig.sync': 'sinkron (menunggu setelah setiap operasi)',
  'E1.fig.returned': 'mesin: perulangan kembali setelah',
  'E1.note.returned': 'hanya diantrikan',
  'E1.fig.finished': 'mesin: waitAll kembali setelah',
  'E1.note.finished': 'biaya sebenarnya',
  'E1.bar.sync': 'sinkron',
  'E1.bar.returned': 'mesin: perulangan kembali',
  'E1.bar.finished': 'mesin: setelah waitAll',
  'E1.text': 'Kedua perulangan membuat satu matriks {n}×{n} per langkah dan mengalikannya dengan dirinya sendiri, seperti perulangan di bab ini.',

  'E2.title': 'Grafik ketergantungan z = x * y + 2',
  'E2.explainHtml': 'Untuk setiap operasi, mesin mencatat larik mana yang dibaca dan mana yang ditulis. Hanya dari catatan itu, yang diambil ' +
    'profiler selama proses sungguhan, grafik ini digambar: <code>mul</code> harus menunggu kedua <code>ones</code>, <code>add</code> ' +
    'menunggu <code>mul</code>; kedua <code>ones</code> tidak bergantung pada apa pun dan boleh berjalan bersamaan.',
  'E2.fig.ops': 'operasi tercatat',
  'E2.fig.vars': 'larik yang dibaca atau ditulis',
  'E2.resultHtml': 'Hasilnya: z = <code>{z}</code>',

  'E3.title': 'Penghalang',
  'E3.explainHtml': 'Dua cara menunggu: <code>y.waitToRead()</code> menunggu operasi yang menulis <code>y</code>; <code>nd.waitAll()</code> ' +
    'menunggu semua yang ada di antrian. Dengan satu perkalian di antrian, keduanya memakan waktu hampir sama; dengan dua, ' +
    '<code>waitAll</code> menunggu keduanya, sedangkan <code>y.waitToRead()</code> pada yang pertama menunggu kira-kira ' +
    'satu (mesin menjalankannya sesuai urutan masuk antrian): tunggu hanya yang Anda perlukan. Mencetak hasil juga berarti menunggu.',
  'E3.fig.queued': 'dot(x, x).sum() diantrikan setelah',
  'E3.fig.printed': 'mencetak jumlah selesai setelah',
  'E3.fig.waitToRead': 'satu perkalian + y.waitToRead()',
  'E3.fig.waitAll': 'satu perkalian + nd.waitAll()',
  'E3.fig.waitAll2': 'dua perkalian + nd.waitAll()',
  'E3.bar.waitToRead': 'satu perkalian + waitToRead',
  'E3.bar.waitAll': 'satu perkalian + waitAll',
  'E3.bar.waitAll2': 'dua perkalian + waitAll',
  'E3.fig.waitFirst': 'dua perkalian + y.waitToRead() pada yang pertama',
  'E3.bar.waitFirst': 'dua perkalian + waitToRead (pertama)',
  'E3.textHtml': 'Perkalian matriks {n}×{n}. jumlah = <code>{sum}</code>',

  'E4.title': 'Pemblokir implisit',
  'E4.explainHtml': 'Apa pun yang membutuhkan nilai harus menunggunya: menyalin ke larik host (<code>dataSync</code>), skalar ' +
    '(<code>item</code>), teks (<code>toString</code>). Masing-masing di bawah ini memakan satu perkalian penuh. Cara JavaScript, ' +
    '<code>await y.data()</code>, menunggu tanpa memblokir: sebuah timer 1 md tetap berbunyi selama itu.',
  'E4.fig.dataSync': 'perkalian + dataSync()',
  'E4.note.values': { other: '{count} nilai disalin keluar' },
  'E4.fig.item': 'perkalian + norm().item()',
  'E4.note.norm': 'norma = {norm}',
  'E4.fig.toString': 'perkalian + sum().toString()',
  'E4.fig.awaitData': 'perkalian + await data()',
  'E4.fig.dataReturned': 'data() mengembalikan promise-nya setelah',
  'E4.fig.ticks': 'timer 1 md berbunyi selama menunggu',
  'E4.note.ticks': 'kali: thread sedang bebas',

  'E5.title': 'Banyak operasi kecil: t1, t2, t3',
  'E5.explainHtml': 'N <code>y = x + 1</code> pada larik 1×2 (N = 10.000 di bab ini; kolom operasi mengaturnya), menunggu setelah masing-masing atau sekali di akhir. Bab ini ' +
    'membagi satu langkah menjadi tiga: <b>t1</b> frontend memasukkan operasi, <b>t2</b> thread backend menghitungnya, <b>t3</b> ' +
    'hasilnya dikembalikan. Menunggu setiap kali memakan N (t1 + t2 + t3); menunggu sekali membuat pengantrian dan komputasi tumpang tindih.',
  'E5.fig.sync': 'sinkron (waitToRead setiap kali)',
  'E5.note.perStep': '{time} per langkah',
  'E5.fig.async': 'asinkron (waitAll sekali)',
  'E5.fig.speedup': 'percepatan',
  'E5.fig.push': 'pengantrian saja, dalam perulangan asinkron',
  'E5.note.perPush': '{time} per pengantrian dan penghapusan',
  'E5.fig.t1': 't1: pengantrian (frontend)',
  'E5.note.t1': 'diukur di sekitar setiap pengantrian',
  'E5.fig.t2': 't2: komputasi (pekerja)',
  'E5.note.t2': 'rata-rata {count} operasi yang diprofil (jam berdetak tiap {tick})',
  'E5.fig.t3': 't3: kembali ke JavaScript',
  'E5.note.t3': 'satu langkah sinkron − t1 − t2',
  'E5.fig.chapterModel': 'model bab untuk perulangan asinkron',
  'E5.note.chapterModel': 't1 + N t2 + t3: mengandaikan N t2 > (N − 1) t1, yaitu pekerja yang menentukan kecepatan',
  'E5.fig.model': 'model perulangan asinkron',
  'E5.note.model': 'max(t1 + N t2 + t3, N t1 + t2 + t3): bila pengantrian lebih lambat, pengantrianlah yang menentukan kecepatan',
  'E5.bar.each': 'menunggu setelah tiap operasi',
  'E5.bar.once': 'menunggu sekali',
  'E5.text.pushBound': 'Di sini t1 > t2: JavaScript memasukkan operasi lebih lambat daripada pekerja menghitung, jadi perulangan asinkron berjalan secepat pengantriannya.',
  'E5.text.workerBound': 'Di sini t2 ≥ t1: para pekerja adalah hambatannya, dan perulangan asinkron memakan sekitar N t2.',

  'E6.title': 'Memori: jangan mengisi antrian berlebihan',
  'E6.explainHtml': 'Bab ini memperingatkan agar antrian tidak diisi berlebihan; edisi bahasa Tionghoa (MXNet) melatih MLP (Dense 2048 relu, Dense 512 relu, Dense 1; minibatch 1024×512; SGD, laju pembelajaran 0,005; ' +
    'loss L2) dengan dan tanpa pembacaan loss yang menyinkronkan di setiap minibatch. Di sini MLP itu dilatih dengan empat cara: dengan pembacaan loss yang menyinkronkan di setiap minibatch; tanpa pembacaan dan dengan batas byte ' +
    'mesin dimatikan (frontend melaju di depan dan setiap minibatch dalam antrian menahan memorinya: setelah sekitar 33 minibatch, ' +
    '2 GiB milik modul habis); tanpa pembacaan tetapi dengan batas tekanan balik yang kecil, yang membuat pengantrian menunggu; dan ' +
    'tanpa pembacaan dengan mesin bawaan, yang batas byte-nya (seperempat heap modul, 512 MiB, yaitu 536,9 MB) membiarkan frontend ' +
    'melaju dulu, lalu menunggu. Batas menghitung apa yang dijaga tetap hidup oleh pekerjaan dalam antrian (keluaran operasi yang ' +
    'belum berjalan, dan larik yang dibuang tetapi masih dibaca operasi dalam antrian); memori yang ditampilkan juga mencakup apa ' +
    'yang dipegang program sendiri (parameter, minibatch, apa yang disimpan autograd untuk propagasi balik), sehingga puncaknya bisa ' +
    'melewati batas. Grafik mengambil sampel byte yang dipakai mesin dari waktu ke waktu, jadi bisa melewatkan puncak tepat yang ' +
    'diberikan tabel. Batas-batas ini milik asyncnd sendiri: MXNet, tempat bab ini mengukurnya, tidak memilikinya, ' +
    'jadi di sana saran bab untuk menyinkronkan setiap minibatch tetap berlaku.',
  'E6.unavailableHtml': '<strong>Eksperimen ini belum bisa dijalankan.</strong> Ia membutuhkan <code>nd.nn</code> dan <code>nd.autograd</code> ' +
    'di API JavaScript, yang tidak dimiliki build paket WebAssembly ini (bangun ulang: make wasm). Panel ini tidak menampilkan angka ' +
    'daripada menampilkan angka karangan; ia berjalan begitu modul menyediakannya.',
  'E6.mode.sync': 'baca tiap minibatch (l.mean().item())',
  'E6.mode.none': 'tanpa pembacaan',
  'E6.mode.bound': 'tanpa pembacaan, batas mesin {size}',
  'E6.mode.default': 'tanpa pembacaan, mesin bawaan',
  'E6.col.peak': 'kenaikan puncak memori',
  'E6.col.returned': 'perulangan kembali setelah',
  'E6.col.perBatch': 'waktu per minibatch',
  'E6.col.batchesDone': 'minibatch selesai',
  'E6.col.bound': 'batas byte',
  'E6.col.pushWaits': 'pengantrian yang menunggu',
  'E6.source.wasmHeap': 'heap WebAssembly modul',
  'E6.boundOff': 'mati',
  'E6.axis.x': 'milidetik sejak minibatch pertama',
  'E6.axis.y': 'MB terpakai di atas awal',
  'E6.text.peaks': 'Tanpa pembacaan, antrian menahan hingga {none} lebih banyak; dengan pembacaan, {sync}.',
  'E6.text.default': { other: 'Mesin bawaan menahan paling banyak {peak} lebih (batasnya: {bound}, dari {source}), dan {count} pengantrian menunggu karenanya.' },
  'E6.text.stopped': '“{mode}” berhenti setelah {done} dari {total} minibatch: {error}.',

  'E7.title': 'Tidak ada GPU di sini: asinkroni di CPU',
  'E7.explainHtml': 'WebAssembly tidak punya GPU, jadi perbandingan CPU dengan GPU dari bab ini tidak bisa berjalan di peramban. Latihannya ' +
    'bisa: <i>di CPU, apakah asinkroni masih dapat diamati?</i> Pekerja mesin menghitung sebuah perkalian sementara thread ini ' +
    'mengerjakan tugas JavaScript-nya sendiri dengan durasi serupa. Jika keduanya tumpang tindih, mengerjakan keduanya memakan waktu ' +
    'sekitar yang lebih lama dari keduanya, bukan jumlahnya.',
  'E7.fig.dot': 'perkalian saja',
  'E7.fig.js': 'tugas JavaScript saja',
  'E7.fig.serial': 'satu demi satu (jumlah)',
  'E7.fig.overlap': 'keduanya sekaligus (pengantrian, tugas JS, menunggu)',
  'E7.fig.push': 'pengantrian kembali setelah',
  'E7.bar.dot': 'perkalian saja',
  'E7.bar.js': 'JavaScript saja',
  'E7.bar.serial': 'satu demi satu',
  'E7.bar.overlap': 'keduanya sekaligus',
  'E7.text.gpu': 'GPU: tidak ada, WebAssembly hanya berjalan di CPU.',
  'E7.text.overlap': 'Keduanya sekaligus jelas lebih cepat daripada jumlahnya: mesin di CPU juga asinkron. Di asyncnd, ' +
    'seperti di MXNet, operasi CPU juga dimasukkan ke antrian; PyTorch menjalankan operasi CPU di thread pemanggil, dan ' +
    'perbedaan inilah yang diminta latihan itu untuk Anda perhatikan.',
  'E7.text.noOverlap': 'Di sini keduanya sekaligus memakan waktu sekitar jumlahnya, tetapi pengantrian tetap kembali ' +
    'seketika: panggilannya asinkron, dan keduanya berjalan berurutan hanya karena thread mesin dan thread ini berebut ' +
    'inti yang sama. Coba satu thread pekerja (kanan atas) pada mesin dua inti.',

  'code.tag': 'Kode',
  'code.title': 'Eksperimen Anda sendiri',
  'code.helpHtml': 'JavaScript terhadap API, dijalankan di Worker: panggilan yang memblokir seperti <code>x.item()</code>, ' +
    '<code>x.waitToRead()</code> dan <code>nd.waitAll()</code> diperbolehkan di sini. <code>nd</code> adalah modul yang dimuat, ' +
    '<code>console.log</code> mencetak di bawah, <code>await</code> bisa dipakai. Grafik menunjukkan operasi mana yang membaca dan ' +
    'menulis larik mana; lini masa menunjukkan kapan masing-masing berjalan.' +
    ' Sel yang terus mengalokasikan memori dapat menghabiskan memori tab dan membuatnya mogok. Larik yang ' +
    'ditinggalkannya baru dibebaskan saat pengumpul sampah berjalan: <code>x.delete()</code> langsung membebaskan satu larik, ' +
    'dan Muat ulang worker memulai dari awal.',
  'code.outputEmpty': 'Keluaran muncul di sini.',
  'code.graphTitle': 'Grafik ketergantungan',
  'code.graphHint': 'Jalankan kode untuk melihat operasi mana yang membaca dan menulis larik mana.',
  'code.timelineHint': 'Jalankan kode untuk melihat apa yang dijalankan tiap thread mesin.',
  'code.running': 'berjalan…',
  'code.finished': { other: 'selesai dalam {time} · {count} operasi ditambahkan' },
  'code.stopped': 'berhenti karena galat; mesin tetap berjalan',
  'code.restarted': 'berhenti: worker dimulai ulang dengan mesin baru (larik yang sudah dibuat hilang)',
  'code.notRun': 'tidak dijalankan: ada isian di kepala halaman yang ditolak',
  'code.parseError': 'Sel tidak dapat diurai: {message}',
  'code.moreChars': { other: '… dan {count} karakter lagi' },
  'code.truncated': 'keluaran dipotong setelah {count} baris',
  'code.error': 'Galat: {message}',
  'code.errorAt': 'Galat (baris {line}): {message}',
  'code.thrown': 'yang dilempar bukan sebuah Error: {value}',
  'code.cannotShow': '(hasil tidak dapat ditampilkan: {message})',
  'code.unhandled': 'penolakan yang tidak ditangani: {message}',
  'code.noOp': 'Tidak ada operasi yang tercatat.',
  'code.example.where': 'Berjalan di Web Worker ruang uji: panggilan yang memblokir boleh dipakai di sini.',
  'code.example.independent1': 'dua perkalian ini tidak saling',
  'code.example.independent2': 'bergantung: keduanya bisa berjalan bersamaan',
  'code.example.sum': 'menunggu keduanya, di dalam mesin',
  'code.example.pending': 'diantrikan; operasi yang tertunda sekarang:',
  'code.example.item': 'item() memblokir sampai nilainya ada',
};

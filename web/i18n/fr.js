// i18n/fr.js: the playground in French (same keys as en.js; the chapter's terms: calcul
// asynchrone, file d'attente, frontend et backend, barrières et bloqueurs, graphe de dépendance).
export default {
  'page.title': 'Bac à sable asyncnd : le calcul asynchrone, en direct',
  'header.brandHtml': 'asyncnd <span>bac à sable</span>',
  'header.tagline': 'Le chapitre « Calcul asynchrone », exécuté en direct sur le moteur WebAssembly d’asyncnd, avec le dessin de ce que le moteur a fait.',
  'header.language': 'Langue',
  'header.threads': 'Threads du moteur',
  'header.reload': 'Relancer le worker',
  'header.reloadTitle': 'Redémarre le Web Worker avec ce nombre de threads du moteur',
  'header.maxOps': 'Opérations en vol (max.)',
  'header.maxOpsTitle': 'Contre-pression : une mise en file attend tant que ce nombre d’opérations est en cours (vide = la valeur par défaut du moteur, 524 288 ; 0 = sans limite)',
  'header.maxMB': 'Mo en vol (max.)',
  'header.maxMBTitle': 'Contre-pression : une mise en file attend tant que ce nombre de Mo de résultats est en attente (vide = la valeur par défaut du moteur, un quart du tas de 2 Gio ; 0 = sans limite)',
  'header.boundDefault': 'défaut',
  'header.stop': 'Arrêter',
  'header.stopTitle': 'Met fin à l’exécution en cours en redémarrant le Web Worker, avec le nombre de threads choisi',
  'status.starting': 'chargement du module…',
  'status.loading': { one: 'chargement du module avec {count} thread du moteur…', other: 'chargement du module avec {count} threads du moteur…' },
  'status.ready': { one: 'prêt · {count} thread du moteur · {backend} · threads disponibles (isolation cross-origin)',
                    other: 'prêt · {count} threads du moteur · {backend} · threads disponibles (isolation cross-origin)' },
  'status.workerFailed': 'le worker n’a pas pu démarrer : {why}',
  'status.unknownError': 'erreur inconnue',
  'status.notIsolated': 'threads indisponibles : la page n’est pas isolée (cross-origin)',
  'status.notSecure': 'threads indisponibles : la page n’est pas dans un contexte sécurisé (http:// simple vers une autre machine)',
  'banner.notIsolatedHtml': '<strong>Pas de threads ici.</strong> Cette page n’est pas isolée (cross-origin isolation) : le navigateur ' +
    'refuse donc <code>SharedArrayBuffer</code>, dont les threads WebAssembly ont besoin, et le moteur ne peut pas démarrer. ' +
    'Servez le bac à sable avec <code>make playground</code> (qui envoie les en-têtes <code>Cross-Origin-Opener-Policy: same-origin</code> et ' +
    '<code>Cross-Origin-Embedder-Policy: require-corp</code>) et ouvrez <code>http://127.0.0.1:8080/</code>, pas une URL file:// ; ' +
    'tout autre serveur doit envoyer ces deux mêmes en-têtes.',
  'banner.notSecureHtml': '<strong>Pas de threads ici.</strong> Cette page a été ouverte en <code>http://</code> simple depuis une autre ' +
    'machine, ce qui n’est pas un contexte sécurisé : quels que soient les en-têtes envoyés par le serveur, le navigateur refuse ' +
    'alors <code>SharedArrayBuffer</code>, dont les threads WebAssembly ont besoin, et le moteur ne peut pas démarrer. Ouvrez-la en ' +
    'HTTPS, ou par un tunnel SSH vers le serveur (<code>ssh -L 8080:127.0.0.1:8080 host</code>, puis <code>http://127.0.0.1:8080/</code>) : ' +
    '<code>localhost</code> et <code>127.0.0.1</code> comptent comme sécurisés.',
  'intro.textHtml': 'Chaque appel au moteur ne fait que <em>mettre en file d’attente</em> une opération, puis rend la main. Les threads ' +
    'du moteur exécutent les opérations en attente dès que ce qu’elles lisent est prêt : les indépendantes en même temps, ' +
    'les dépendantes dans l’ordre. Votre code n’attend que là où il a besoin de valeurs. Chaque panneau ci-dessous exécute ' +
    'une expérience du chapitre dans un Web Worker (cette page ne bloque jamais), affiche les mesures et une chronologie ' +
    'de ce que chaque thread du moteur a exécuté : molette pour zoomer, glisser pour se déplacer, double-clic pour revenir.',
  'footer.versions': 'asyncnd (WebAssembly, SIMD128, pthreads) · bibliothèques fournies localement : {list}',

  'error.workerRestarted': 'le worker a été redémarré',
  'error.notLoaded': 'le module n’est pas chargé',
  'error.notIsolated': 'cette page n’est pas isolée (cross-origin) : SharedArrayBuffer, et donc les threads WebAssembly, sont indisponibles',
  'error.noExperiment': 'aucune expérience ne s’appelle {name}',
  'error.oomHint': 'La mémoire du module est pleine. Les tableaux laissés par une cellule de code ne sont libérés qu’au passage du ramasse-miettes (delete() en libère un tout de suite) ; « Relancer le worker » démarre un moteur neuf, avec toute sa mémoire.',

  // Fields the page refuses before running (inputs.js); {field} is the field's name
  'input.notNumber': '{field} : ce qui a été saisi n’est pas un nombre que ce champ peut contenir',
  'input.empty': '{field} est vide : donnez une valeur de {min} à {max}',
  'input.rangeInt': '{field} = {value} est refusé : un nombre entier de {min} à {max}',
  'input.rangeStep': '{field} = {value} est refusé : de {min} à {max} par pas de {step}',
  'input.boundOps': '{field} = {value} est refusé : un nombre entier d’opérations, 0 ou plus (vide : la valeur par défaut du moteur ; 0 : sans limite)',
  'input.boundMB': '{field} = {value} est refusé : un nombre de Mo, 0 ou plus, décimales permises (vide : la valeur par défaut du moteur ; 0 : sans limite)',

  'panel.run': 'Lancer',
  'panel.running': 'En cours…',
  'panel.runAgain': 'Relancer',
  'panel.failed': 'échec',
  'panel.doneIn': 'terminé en {time}',
  'panel.timelineHint': 'Lancez l’expérience pour voir ce que chaque thread du moteur a exécuté.',
  'panel.graphTitle': 'Graphe de dépendance (d’après le profileur)',
  'timeline.title': 'Chronologie',
  'timeline.resetZoom': 'zoom initial',
  'timeline.worker': 'thread {n}',
  'timeline.jsThread': 'thread JavaScript',
  'timeline.axis': 'millisecondes depuis la première mise en file',
  'timeline.tooltip': '{name} : exécutée en {ran}, en file d’attente {queued} avant',
  'timeline.opFailed': '(échec)',
  'timeline.opSkipped': '(sautée)',
  'timeline.empty': 'Aucune opération du moteur n’a été enregistrée pendant cette exécution.',
  'timeline.lost': 'Ce que cette exécution avait enregistré a été perdu avec le worker où elle tournait.',
  'timeline.recorded': { one: '{count} opération enregistrée.', other: '{count} opérations enregistrées.' },
  'timeline.drawnOf': 'Les {shown} premières sur {total} sont dessinées.',
  'timeline.help': 'Molette pour zoomer, glisser pour se déplacer, double-clic pour revenir.',
  'timeline.skew': 'Les horloges des threads divergent d’au moins {time} pendant cette exécution (une opération semble commencer ' +
    'avant la fin d’une opération qu’elle lit, sur un autre thread) : les barres de lignes différentes peuvent être décalées ' +
    'd’autant. Le module mesure tous les threads avec une seule horloge (performance.timeOrigin + now()) ; un écart signifie ' +
    'que les horloges du navigateur ont dérivé.',
  'graph.truncated': 'Les {shown} premières opérations sur {total} sont dessinées.',
  'graph.summary': '{ops}, {arrays}. Flèches : lu par, écrit par.',
  'graph.ops': { one: '{count} opération', other: '{count} opérations' },
  'graph.arrays': { one: '{count} tableau', other: '{count} tableaux' },
  'axis.ms': 'millisecondes',
  'axis.us': 'microsecondes',

  'progress.starting': 'démarrage',
  'progress.done': 'terminé',
  'progress.warmup': 'échauffement',
  'progress.syncStep': 'synchrone {i}/{n}',
  'progress.queueing': 'moteur : mise en file d’attente',
  'progress.e2': 'calcul de z = x * y + 2',
  'progress.calling': 'appel de {call}',
  'progress.twoDots': 'deux produits, puis waitAll()',
  'progress.synchronous': 'synchrone',
  'progress.asynchronous': 'asynchrone',
  'progress.timingPushes': 'mesure des mises en file (t1)',
  'progress.profiling': 'profilage (t2)',
  'progress.batch': '{mode} : minibatch {i}/{n}',
  'progress.jsAlone': 'JavaScript seul',
  'progress.bothAtOnce': 'les deux à la fois',

  'param.size': 'taille',
  'param.repeats': 'répétitions',
  'param.ops': 'opérations',
  'param.batches': 'minibatchs',
  'param.boundMB': 'limite (Mo)',

  'E1.title': 'Mettre en file n’est pas calculer',
  'E1.explainHtml': 'Des matrices aléatoires (dix de 1000×1000 dans le chapitre ; les champs « répétitions » et « taille » les changent), chacune utilisée dans un produit matriciel. L’exécution <b>synchrone</b> attend ' +
    'chaque résultat avant de continuer, comme NumPy. L’exécution par le <b>moteur</b> ne fait que mettre le travail en file ' +
    'd’attente : sa boucle rend la main presque aussitôt, et le vrai coût apparaît quand <code>nd.waitAll()</code> attend ' +
    'que les threads aient fini.',
  'E1.fig.sync': 'synchrone (attente après chaque opération)',
  'E1.fig.returned': 'moteur : la boucle a rendu la main après',
  'E1.note.returned': 'seulement mis en file',
  'E1.fig.finished': 'moteur : waitAll a rendu la main après',
  'E1.note.finished': 'le vrai coût',
  'E1.bar.sync': 'synchrone',
  'E1.bar.returned': 'moteur : fin de la boucle',
  'E1.bar.finished': 'moteur : après waitAll',
  'E1.text': 'Les deux boucles créent une matrice {n}×{n} à chaque pas et la multiplient par elle-même, comme la boucle du chapitre.',

  'E2.title': 'Le graphe de dépendance de z = x * y + 2',
  'E2.explainHtml': 'Pour chaque opération, le moteur note les tableaux qu’elle lit et ceux qu’elle écrit. Ce graphe est dessiné à partir ' +
    'de ces seules notes, prises par le profileur pendant une vraie exécution : <code>mul</code> doit attendre les deux ' +
    '<code>ones</code>, <code>add</code> attend <code>mul</code> ; les deux <code>ones</code> ne dépendent de rien et peuvent ' +
    's’exécuter en même temps.',
  'E2.fig.ops': 'opérations enregistrées',
  'E2.fig.vars': 'tableaux lus ou écrits',
  'E2.resultHtml': 'Le résultat : z = <code>{z}</code>',

  'E3.title': 'Barrières',
  'E3.explainHtml': 'Deux façons d’attendre : <code>y.waitToRead()</code> attend les opérations qui écrivent <code>y</code> ; ' +
    '<code>nd.waitAll()</code> attend tout ce qui est en file d’attente. Avec un seul produit en file, elles durent à peu près ' +
    'autant ; avec deux, <code>waitAll</code> attend les deux, tandis que <code>y.waitToRead()</code> sur le premier ' +
    'en attend environ un (le moteur les exécute dans l’ordre de mise en file) : n’attendez que ce dont vous avez besoin. ' +
    'Afficher un résultat est aussi une attente.',
  'E3.fig.queued': 'dot(x, x).sum() mis en file après',
  'E3.fig.printed': 'l’affichage de la somme a fini après',
  'E3.fig.waitToRead': 'un produit + y.waitToRead()',
  'E3.fig.waitAll': 'un produit + nd.waitAll()',
  'E3.fig.waitAll2': 'deux produits + nd.waitAll()',
  'E3.bar.waitToRead': 'un produit + waitToRead',
  'E3.bar.waitAll': 'un produit + waitAll',
  'E3.bar.waitAll2': 'deux produits + waitAll',
  'E3.fig.waitFirst': 'deux produits + y.waitToRead() sur le premier',
  'E3.bar.waitFirst': 'deux produits + waitToRead (premier)',
  'E3.textHtml': 'Produits de matrices {n}×{n}. somme = <code>{sum}</code>',

  'E4.title': 'Bloqueurs implicites',
  'E4.explainHtml': 'Tout ce qui a besoin des valeurs doit les attendre : une copie vers un tableau de l’hôte (<code>dataSync</code>), ' +
    'un scalaire (<code>item</code>), du texte (<code>toString</code>). Chacun ci-dessous coûte un produit complet. ' +
    'À la manière de JavaScript, <code>await y.data()</code> attend sans bloquer : un minuteur de 1 ms continue de se déclencher pendant ce temps.',
  'E4.fig.dataSync': 'produit + dataSync()',
  'E4.note.values': { one: '{count} valeur copiée', other: '{count} valeurs copiées' },
  'E4.fig.item': 'produit + norm().item()',
  'E4.note.norm': 'norme = {norm}',
  'E4.fig.toString': 'produit + sum().toString()',
  'E4.fig.awaitData': 'produit + await data()',
  'E4.fig.dataReturned': 'data() a rendu sa promesse après',
  'E4.fig.ticks': 'déclenchements d’un minuteur de 1 ms pendant l’attente',
  'E4.note.ticks': 'fois : le thread était libre',

  'E5.title': 'De nombreuses petites opérations : t1, t2, t3',
  'E5.explainHtml': 'N <code>y = x + 1</code> sur un tableau 1×2 (N = 10 000 dans le chapitre ; le champ « opérations » le fixe), en attendant après chacune ou une seule fois à la fin. Le chapitre ' +
    'découpe un pas en trois : <b>t1</b> le frontend met l’opération en file, <b>t2</b> un thread du backend la calcule, <b>t3</b> le ' +
    'résultat revient. Attendre à chaque fois coûte N (t1 + t2 + t3) ; attendre une fois laisse la mise en file et le calcul se chevaucher.',
  'E5.fig.sync': 'synchrone (waitToRead à chaque fois)',
  'E5.note.perStep': '{time} par pas',
  'E5.fig.async': 'asynchrone (waitAll une fois)',
  'E5.fig.speedup': 'accélération',
  'E5.fig.push': 'les mises en file seules, dans la boucle asynchrone',
  'E5.note.perPush': '{time} par mise en file et suppression',
  'E5.fig.t1': 't1 : mise en file (frontend)',
  'E5.note.t1': 'mesuré autour de chaque mise en file',
  'E5.fig.t2': 't2 : calcul (thread du moteur)',
  'E5.note.t2': 'moyenne de {count} opérations profilées (l’horloge avance par pas de {tick})',
  'E5.fig.t3': 't3 : retour vers JavaScript',
  'E5.note.t3': 'un pas synchrone − t1 − t2',
  'E5.fig.chapterModel': 'le modèle du chapitre pour la boucle asynchrone',
  'E5.note.chapterModel': 't1 + N t2 + t3 : il suppose N t2 > (N − 1) t1, que les threads du moteur donnent le rythme',
  'E5.fig.model': 'modèle de la boucle asynchrone',
  'E5.note.model': 'max(t1 + N t2 + t3, N t1 + t2 + t3) : là où les mises en file sont plus lentes, ce sont elles qui donnent le rythme',
  'E5.bar.each': 'attente après chaque opération',
  'E5.bar.once': 'une seule attente',
  'E5.text.pushBound': 'Ici t1 > t2 : JavaScript met en file moins vite qu’un thread ne calcule, donc la boucle asynchrone avance au rythme des mises en file.',
  'E5.text.workerBound': 'Ici t2 ≥ t1 : les threads du moteur sont le goulot d’étranglement, et la boucle asynchrone coûte environ N t2.',

  'E6.title': 'Mémoire : ne pas trop remplir la file d’attente',
  'E6.explainHtml': 'Le chapitre met en garde contre une file d’attente trop remplie ; son édition chinoise (MXNet) entraîne un MLP (Dense 2048 relu, Dense 512 relu, Dense 1 ; minibatchs de 1024×512 ; SGD, taux ' +
    'd’apprentissage 0,005 ; perte L2) avec et sans lecture synchronisante de la perte à chaque minibatch. Ici, ce MLP est entraîné de quatre façons : avec une lecture synchronisante de la perte à chaque minibatch ; ' +
    'sans lecture et sans la limite en octets du moteur (le frontend prend de l’avance et chaque minibatch en file garde sa ' +
    'mémoire : au-delà d’environ 33 minibatchs, les 2 Gio du module sont épuisés) ; sans lecture mais avec une petite limite ' +
    'de contre-pression, qui fait plutôt attendre la mise en file ; et sans lecture avec le moteur par défaut, dont la limite en octets ' +
    '(un quart du tas du module, 512 Mio, soit 536,9 Mo) laisse le frontend prendre de l’avance, puis le fait attendre. ' +
    'Une limite compte ce que le travail en file garde en vie (les sorties des opérations pas encore exécutées, et les tableaux ' +
    'abandonnés que des opérations en file lisent encore) ; la mémoire affichée compte aussi ce que le programme garde lui-même ' +
    '(les paramètres, le minibatch, ce que l’autograd garde pour la rétropropagation), si bien qu’un pic peut dépasser la ' +
    'limite. Le graphique relève au fil du temps les octets utilisés par le moteur ; il peut donc manquer le pic exact que ' +
    'donne le tableau. Ces limites sont propres à asyncnd : MXNet, où le chapitre fait cette mesure, n’en a pas, ' +
    'et là son conseil de synchroniser chaque minibatch reste valable.',
  'E6.unavailableHtml': '<strong>Cette expérience ne peut pas encore s’exécuter.</strong> Elle a besoin de <code>nd.nn</code> et de ' +
    '<code>nd.autograd</code> dans l’API JavaScript, que cette version du paquet WebAssembly n’a pas (reconstruisez-le : make wasm). ' +
    'Le panneau n’affiche aucun chiffre plutôt que des chiffres inventés ; il s’exécutera dès que le module les fournira.',
  'E6.mode.sync': 'lecture à chaque minibatch (l.mean().item())',
  'E6.mode.none': 'sans lecture',
  'E6.mode.bound': 'sans lecture, limite du moteur {size}',
  'E6.mode.default': 'sans lecture, moteur par défaut',
  'E6.col.peak': 'hausse maximale de la mémoire',
  'E6.col.returned': 'la boucle a rendu la main après',
  'E6.col.perBatch': 'temps par minibatch',
  'E6.col.batchesDone': 'minibatchs terminés',
  'E6.col.bound': 'limite en octets',
  'E6.col.pushWaits': 'mises en file qui ont attendu',
  'E6.source.wasmHeap': 'tas WebAssembly du module',
  'E6.boundOff': 'aucune',
  'E6.axis.x': 'millisecondes depuis le premier minibatch',
  'E6.axis.y': 'Mo utilisés au-delà du départ',
  'E6.text.peaks': 'Sans lecture, la file a retenu jusqu’à {none} de plus ; avec une lecture, {sync}.',
  'E6.text.default': { one: 'Le moteur par défaut a retenu au plus {peak} de plus (sa limite : {bound}, source : {source}) ; {count} mise en file a attendu.',
                      other: 'Le moteur par défaut a retenu au plus {peak} de plus (sa limite : {bound}, source : {source}) ; {count} mises en file ont attendu.' },
  'E6.text.stopped': '« {mode} » s’est arrêté après {done} sur {total} minibatchs : {error}.',

  'E7.title': 'Pas de GPU ici : l’asynchronie sur le CPU',
  'E7.explainHtml': 'WebAssembly n’a pas de GPU : la comparaison CPU contre GPU du chapitre ne peut pas tourner dans un navigateur. Son ' +
    'exercice, si : <i>sur le CPU, peut-on encore observer l’asynchronie ?</i> Les threads du moteur calculent un produit pendant ' +
    'que ce thread fait son propre travail JavaScript, d’une durée semblable. S’ils se chevauchent, faire les deux prend à peu près ' +
    'la plus longue des deux durées, pas leur somme.',
  'E7.fig.dot': 'le produit seul',
  'E7.fig.js': 'le travail JavaScript seul',
  'E7.fig.serial': 'l’un après l’autre (somme)',
  'E7.fig.overlap': 'les deux à la fois (mise en file, travail JS, attente)',
  'E7.fig.push': 'la mise en file a rendu la main après',
  'E7.bar.dot': 'produit seul',
  'E7.bar.js': 'JavaScript seul',
  'E7.bar.serial': 'l’un après l’autre',
  'E7.bar.overlap': 'les deux à la fois',
  'E7.text.gpu': 'GPU : aucun, WebAssembly ne tourne que sur le CPU.',
  'E7.text.overlap': 'Les deux à la fois ont pris nettement moins que la somme : le moteur sur CPU est lui aussi asynchrone. ' +
    'Dans asyncnd, comme dans MXNet, les opérations CPU sont elles aussi mises en file ; PyTorch exécute les opérations CPU ' +
    'dans le thread appelant, et c’est ce contraste que l’exercice vous demande de remarquer.',
  'E7.text.noOverlap': 'Les deux à la fois ont pris à peu près la somme ici, et pourtant la mise en file a rendu la main ' +
    'aussitôt : l’appel était asynchrone, et les deux se sont suivis seulement parce que les threads du moteur et celui-ci ' +
    'se disputent les mêmes cœurs. Essayez un seul thread du moteur (en haut à droite) sur une machine à deux cœurs.',

  'code.tag': 'Code',
  'code.title': 'Votre propre expérience',
  'code.helpHtml': 'Du JavaScript sur l’API, exécuté dans le Worker : les appels bloquants comme <code>x.item()</code>, ' +
    '<code>x.waitToRead()</code> et <code>nd.waitAll()</code> sont permis ici. <code>nd</code> est le module chargé, ' +
    '<code>console.log</code> écrit ci-dessous, <code>await</code> fonctionne. Le graphe montre quelle opération a lu et écrit ' +
    'quel tableau ; la chronologie, quand chacune s’est exécutée.' +
    ' Une cellule qui alloue sans fin peut remplir la mémoire de l’onglet et le faire planter. Les tableaux ' +
    'qu’elle laisse ne sont libérés qu’au passage du ramasse-miettes : <code>x.delete()</code> en libère un tout de suite, et ' +
    '« Relancer le worker » repart de zéro.',
  'code.outputEmpty': 'La sortie s’affiche ici.',
  'code.graphTitle': 'Graphe de dépendance',
  'code.graphHint': 'Lancez le code pour voir quelle opération a lu et écrit quel tableau.',
  'code.timelineHint': 'Lancez le code pour voir ce que chaque thread du moteur a exécuté.',
  'code.running': 'en cours…',
  'code.finished': { one: 'terminé en {time} · {count} opération mise en file', other: 'terminé en {time} · {count} opérations mises en file' },
  'code.stopped': 'arrêté sur une erreur ; le moteur continue de tourner',
  'code.restarted': 'arrêté : le worker a été redémarré avec un nouveau moteur (les tableaux créés jusqu’ici sont perdus)',
  'code.notRun': 'non exécuté : un champ de l’en-tête est refusé',
  'code.parseError': 'La cellule n’a pas pu être analysée : {message}',
  'code.moreChars': { one: '… et {count} caractère de plus', other: '… et {count} caractères de plus' },
  'code.truncated': 'sortie tronquée après {count} lignes',
  'code.error': 'Erreur : {message}',
  'code.errorAt': 'Erreur (ligne {line}) : {message}',
  'code.thrown': 'une valeur qui n’est pas une Error a été levée : {value}',
  'code.cannotShow': '(impossible d’afficher le résultat : {message})',
  'code.unhandled': 'rejet non traité : {message}',
  'code.noOp': 'Aucune opération n’a été enregistrée.',
  'code.example.where': 'S’exécute dans le Web Worker du bac à sable : les appels bloquants sont permis ici.',
  'code.example.independent1': 'ces deux produits ne dépendent pas',
  'code.example.independent2': 'l’un de l’autre : ils peuvent tourner en même temps',
  'code.example.sum': 'attend les deux, dans le moteur',
  'code.example.pending': 'mis en file ; opérations en attente :',
  'code.example.item': 'item() bloque jusqu’à ce que la valeur existe',
};

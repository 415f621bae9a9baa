// The decoder page: the encoder's self-attention, the decoder's self-attention (masked in an autoregressive
// model) and the cross-attention of one translation as tabs; each tab is the attention page's own view
// (attention.js: attentionView) drawn with that tab's weights, labels and mask.
function decoderPage(D) {
  const bar = $("tabs"), buttons = D.tabs.map((t, i) => {
    const b = el("button", {"data-tab": i}, t.name);
    b.onclick = () => show(i);
    bar.appendChild(b);
    return b;
  });
  function show(i) {
    buttons.forEach((b, k) => b.classList.toggle("sel", k === i));
    $("tab-note").textContent = D.tabs[i].note;
    attentionView({...D.tabs[i], title: D.title});
    document.body.dataset.tab = i;
  }
  show(D.first);
}
start(decoderPage);

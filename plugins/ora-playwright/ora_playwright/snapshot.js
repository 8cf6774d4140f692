(sel) => {
  const visible = (el) => !!el && !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
  const found = (selectors) => {
    for (const s of selectors) {
      for (const el of document.querySelectorAll(s)) {
        if (visible(el)) return (el.innerText || el.textContent || s).trim().slice(0, 300) || s;
      }
    }
    return null;
  };
  const replies = sel.reply ? Array.from(document.querySelectorAll(sel.reply)) : [];
  const last = replies.length ? replies[replies.length - 1] : null;
  return {
    replies: replies.length,
    last: last ? (last.innerText || last.textContent || "") : null,
    busy: sel.busy ? found([sel.busy]) !== null : false,
    input: !!document.querySelector(sel.input),
    login_wall: found(sel.login_wall),
    session_expired: found(sel.session_expired),
    rate_limited: found(sel.rate_limited),
    error_banner: found(sel.error_banner),
  };
}
